"""Op definitions: fluid 1.8's loss ops (bpr_loss, center_loss, huber_loss, kldiv_loss,
margin_rank_loss, rank_loss, sigmoid_cross_entropy_with_logits, teacher_student_sigmoid_loss,
log_loss, smooth_l1_loss, label_smooth, sigmoid_focal_loss). The sampled losses
(hierarchical_sigmoid, nce, sample_logits) are in loss_sampled.py, imported at the bottom.

>>> # OP_DEFS["huber_loss"].attrs["delta"].default  -> 1.0
"""
from __future__ import annotations

import math

from .nn import INT_DTYPES, _check_float, _dims_match
from .registry import define_op

K_IGNORE_INDEX = -100  # fluid's kIgnoreIndex


def _same_shape(ctx, a_slot: str, b_slot: str):
    a, b = ctx.input(a_slot), ctx.input(b_slot)
    ctx.check(_dims_match(a.shape, b.shape),
              f"{a_slot}{list(a.shape)} and {b_slot}{list(b.shape)} must have the same shape")


def _class_ids(ctx, slot: str, rows_like: tuple):
    """An int label of shape rows_like[:-1] + [1] (one class id per row)."""
    lab = ctx.input(slot)
    ctx.check(lab.dtype in INT_DTYPES, f"{slot} must hold int64 class ids, got {lab.dtype}")
    want = tuple(rows_like[:-1]) + (1,)
    ctx.check(_dims_match(lab.shape, want),
              f"{slot} must have shape {list(want)} (one class id per row), got "
              f"{list(lab.shape)}")


@define_op("bpr_loss", inputs=["X", "Label"], outputs=["Y"], no_grad_inputs=("Label",),
           grad_uses=("X", "Label"))
def _bpr_loss(ctx):
    x = ctx.input("X")
    _check_float(ctx, x, "X")
    _class_ids(ctx, "Label", x.shape)
    ctx.set_output("Y", tuple(x.shape[:-1]) + (1,), x.dtype)


@define_op("center_loss", inputs=["X", "Label", "Centers", "CenterUpdateRate"],
           outputs=["CentersOut", "SampleCenterDiff", "Loss"],
           no_grad_inputs=("Label", "Centers", "CenterUpdateRate"),
           nondiff_outputs=("CentersOut", "SampleCenterDiff"), grad_uses=("SampleCenterDiff",),
           attrs={"cluster_num": ("int", 0), "need_update": ("bool", False)})
def _center_loss(ctx):
    x, centers = ctx.input("X"), ctx.input("Centers")
    _check_float(ctx, x, "X")
    ctx.check(len(x.shape) == 2, f"X must be [N, D], got {list(x.shape)}")
    _class_ids(ctx, "Label", x.shape)
    ctx.check(_dims_match(centers.shape, (ctx.attr("cluster_num"), x.shape[1])),
              f"Centers must be [cluster_num, D] = [{ctx.attr('cluster_num')}, {x.shape[1]}], "
              f"got {list(centers.shape)}")
    ctx.set_output("CentersOut", centers.shape, centers.dtype)
    ctx.set_output("SampleCenterDiff", x.shape, x.dtype)
    ctx.set_output("Loss", (x.shape[0], 1), x.dtype)


@define_op("huber_loss", inputs=["X", "Y"], outputs=["Residual", "Out"],
           nondiff_outputs=("Residual",), grad_uses=("Residual",),
           attrs={"delta": ("float", 1.0)})
def _huber_loss(ctx):
    _check_float(ctx, ctx.input("X"), "X")
    _same_shape(ctx, "X", "Y")
    ctx.set_output_like("Residual", "X")
    ctx.set_output_like("Out", "X")


KLDIV_REDUCTIONS = ("none", "batchmean", "mean", "sum")


@define_op("kldiv_loss", inputs=["X", "Target"], outputs=["Loss"], no_grad_inputs=("Target",),
           grad_uses=("X", "Target"), attrs={"reduction": ("str", "mean")})
def _kldiv_loss(ctx):
    x = ctx.input("X")
    _check_float(ctx, x, "X")
    _same_shape(ctx, "X", "Target")
    red = ctx.attr("reduction")
    ctx.check(red in KLDIV_REDUCTIONS,
              f"reduction must be one of {list(KLDIV_REDUCTIONS)}, got {red!r}")
    ctx.set_output("Loss", x.shape if red == "none" else (1,), x.dtype)


@define_op("margin_rank_loss", inputs=["X1", "X2", "Label"], outputs=["Activated", "Out"],
           no_grad_inputs=("Label",), nondiff_outputs=("Activated",),
           grad_uses=("Label", "Activated"), attrs={"margin": ("float", 0.0)})
def _margin_rank_loss(ctx):
    _check_float(ctx, ctx.input("X1"), "X1")
    _same_shape(ctx, "X1", "X2")
    _same_shape(ctx, "X1", "Label")
    ctx.set_output_like("Activated", "X1")
    ctx.set_output_like("Out", "X1")


@define_op("rank_loss", inputs=["Label", "Left", "Right"], outputs=["Out"],
           no_grad_inputs=("Label",))
def _rank_loss(ctx):
    _check_float(ctx, ctx.input("Left"), "Left")
    _same_shape(ctx, "Left", "Right")
    _same_shape(ctx, "Left", "Label")
    ctx.set_output_like("Out", "Left")


@define_op("sigmoid_cross_entropy_with_logits", inputs=["X", "Label"], outputs=["Out"],
           no_grad_inputs=("Label",), grad_uses=("X", "Label"),
           attrs={"normalize": ("bool", False), "ignore_index": ("int", K_IGNORE_INDEX)})
def _sigmoid_ce(ctx):
    _check_float(ctx, ctx.input("X"), "X")
    _same_shape(ctx, "X", "Label")
    ctx.set_output_like("Out", "X")


@define_op("teacher_student_sigmoid_loss", inputs=["X", "Label"], outputs=["Y"],
           no_grad_inputs=("Label",), grad_uses=("X", "Label"),
           attrs={"soft_max_up_bound": ("float", 15.0),
                  "soft_max_lower_bound": ("float", -15.0)})
def _teacher_student(ctx):
    x = ctx.input("X")
    _check_float(ctx, x, "X")
    ctx.check(len(x.shape) == 2 and x.shape[1] in (1, -1), f"X must be [N, 1], got "
                                                           f"{list(x.shape)}")
    _same_shape(ctx, "X", "Label")
    ctx.set_output_like("Y", "X")


@define_op("log_loss", inputs=["Predicted", "Labels"], outputs=["Loss"],
           no_grad_inputs=("Labels",), attrs={"epsilon": ("float", 1e-4)})
def _log_loss(ctx):
    p = ctx.input("Predicted")
    _check_float(ctx, p, "Predicted")
    _same_shape(ctx, "Predicted", "Labels")
    ctx.check(len(p.shape) == 2 and p.shape[1] in (1, -1),
              f"Predicted must be [N, 1], got {list(p.shape)}")
    ctx.set_output_like("Loss", "Predicted")


@define_op("smooth_l1_loss", inputs=["X", "Y", "InsideWeight?", "OutsideWeight?"],
           outputs=["Diff", "Out"], no_grad_inputs=("InsideWeight", "OutsideWeight"),
           nondiff_outputs=("Diff",), grad_uses=("Diff", "InsideWeight", "OutsideWeight"),
           attrs={"sigma": ("float", 3.0)})
def _smooth_l1(ctx):
    x = ctx.input("X")
    _check_float(ctx, x, "X")
    ctx.check(len(x.shape) >= 2, f"X must have at least 2 dims, got {list(x.shape)}")
    _same_shape(ctx, "X", "Y")
    # fluid 1.8.5 refuses an InsideWeight alone but silently drops an OutsideWeight alone
    # (the loss comes out unweighted); spmd refuses both rather than ignore a given weight
    ctx.check(ctx.has_input("InsideWeight") == ctx.has_input("OutsideWeight"),
              "give both InsideWeight and OutsideWeight, or neither (fluid applies them "
              "together, and ignores an outside weight given alone); for outside weights "
              "only, pass inside weights of ones")
    for slot in ("InsideWeight", "OutsideWeight"):
        if ctx.has_input(slot):
            _same_shape(ctx, "X", slot)
    ctx.set_output_like("Diff", "X")
    ctx.set_output("Out", (x.shape[0], 1), x.dtype)


@define_op("label_smooth", inputs=["X", "PriorDist?"], outputs=["Out"],
           no_grad_inputs=("PriorDist",), grad_uses=(), attrs={"epsilon": ("float", 0.0)})
def _label_smooth(ctx):
    x = ctx.input("X")
    _check_float(ctx, x, "X")
    if ctx.has_input("PriorDist"):
        prior = ctx.input("PriorDist")
        k = x.shape[-1]
        n = -1 if any(d < 0 for d in prior.shape) else math.prod(prior.shape)
        ctx.check(n < 0 or k < 0 or n == k,
                  f"PriorDist must hold one value per class ({k}), got shape "
                  f"{list(prior.shape)}")
    ctx.set_output_like("Out", "X")


@define_op("sigmoid_focal_loss", inputs=["X", "Label", "FgNum"], outputs=["Out"],
           no_grad_inputs=("Label", "FgNum"), grad_uses=("X", "Label", "FgNum"),
           attrs={"gamma": ("float", 2.0), "alpha": ("float", 0.25)})
def _sigmoid_focal_loss(ctx):
    x, fg = ctx.input("X"), ctx.input("FgNum")
    _check_float(ctx, x, "X")
    ctx.check(len(x.shape) == 2, f"X must be [N, D], got {list(x.shape)}")
    _class_ids(ctx, "Label", x.shape)
    ctx.check(fg.dtype in INT_DTYPES and _dims_match(fg.shape, (1,)),
              f"FgNum must be an int32 tensor of shape [1], got {fg.dtype} {list(fg.shape)}")
    ctx.set_output_like("Out", "X")
