"""Kernels: fluid 1.8's loss ops, forward and gradient, written as fluid's CPU kernels compute
them (clips and guards included). The sampled losses are in loss_sampled.py, imported at the
bottom.

>>> # get_kernel("huber_loss")(np, {"X": x, "Y": y}, {"delta": 1.0}, {"Out"})
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .nn import _APPROX_INF, _pick
from .registry import kernel


def _sigmoid(xp, x):
    return 0.5 * (xp.tanh(0.5 * x) + 1.0)  # exact and never overflows


def _softplus_neg_abs(xp, x):
    """log(1 + exp(-|x|)), the stable tail of the logistic loss."""
    return xp.log1p(xp.exp(-xp.abs(x)))


def _class_ids(xp, label, n_classes: int, where: str, bound: str, fix: str):
    """label as one class id per row, each checked to lie in [0, n_classes); these ops have
    no ignore_index, so any other id is the caller's error (fluid 1.8.5 refuses it in
    bpr_loss and crashes in center_loss)."""
    lab = label.reshape(-1)
    bad = (lab < 0) | (lab >= n_classes)
    if bool(bad.any()):
        row = int(xp.argmax(bad))
        raise InvalidArgumentError(
            f"{where}: label holds class id {int(lab[row])} at row {row}, expected ids in "
            f"[0, {n_classes}) ({bound}); {fix}")
    return lab


def _rows(xp, x, label):
    """x as [rows, C] and the checked class id of each row."""
    c = x.shape[-1]
    return x.reshape(-1, c), _class_ids(
        xp, label, c, "bpr_loss", "one per column of input",
        "fix the labels, or give input one column per class")


# -- bpr_loss: mean over j != label of log(1 + exp(x_j - x_label)) ----------------------------

def _bpr_exp(xp, x2, lab):
    e = xp.exp(x2 - _pick(xp, x2, lab)[:, None])
    return xp.where(xp.isinf(e), x2.dtype.type(_APPROX_INF), e)  # fluid's TolerableValue


@kernel("bpr_loss")
def bpr_loss(xp, ins, attrs, want):
    x = ins["X"]
    x2, lab = _rows(xp, x, ins["Label"])
    terms = xp.log(1.0 + _bpr_exp(xp, x2, lab))
    terms[xp.arange(x2.shape[0]), lab] = 0
    y = terms.sum(axis=1) / (x2.shape[1] - 1)
    return {"Y": y.astype(x.dtype, copy=False).reshape(x.shape[:-1] + (1,))}


@kernel("bpr_loss_grad")
def bpr_loss_grad(xp, ins, attrs, want):
    x, dy = ins["X"], ins["Y@GRAD"]
    x2, lab = _rows(xp, x, ins["Label"])
    e = _bpr_exp(xp, x2, lab)
    rows = xp.arange(x2.shape[0])
    g = e / (1.0 + e) * (dy.reshape(-1, 1) / (x2.shape[1] - 1))
    g[rows, lab] = 0
    g[rows, lab] = -g.sum(axis=1)
    return {"X@GRAD": g.astype(x.dtype, copy=False).reshape(x.shape)}


# -- center_loss ---------------------------------------------------------------------------

@kernel("center_loss")
def center_loss(xp, ins, attrs, want):
    x, centers = ins["X"], ins["Centers"]
    k = centers.shape[0]
    lab = _class_ids(xp, ins["Label"], k, "center_loss", f"num_classes={k}",
                     "fix the labels, or build center_loss with a larger num_classes")
    diff = x - centers[lab]
    res = {"SampleCenterDiff": diff, "Loss": 0.5 * (diff * diff).sum(axis=1, keepdims=True)}
    out = centers.copy()
    if attrs["need_update"]:
        onehot = (lab[:, None] == xp.arange(k)[None, :]).astype(x.dtype)
        # fluid: center += alpha * sum(diff of its samples) / (1 + number of its samples)
        rate = float(ins["CenterUpdateRate"].reshape(-1)[0])
        out += (rate * (onehot.T @ diff) / (1.0 + onehot.sum(axis=0))[:, None]).astype(
            out.dtype, copy=False)
    res["CentersOut"] = out
    return res


@kernel("center_loss_grad")
def center_loss_grad(xp, ins, attrs, want):
    return {"X@GRAD": ins["SampleCenterDiff"] * ins["Loss@GRAD"]}


# -- huber, kldiv, margin_rank, rank -------------------------------------------------------

@kernel("huber_loss")
def huber_loss(xp, ins, attrs, want):
    r = ins["Y"] - ins["X"]
    d = attrs["delta"]
    a = xp.abs(r)
    return {"Residual": r, "Out": xp.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d))}


@kernel("huber_loss_grad")
def huber_loss_grad(xp, ins, attrs, want):
    r, dout = ins["Residual"], ins["Out@GRAD"]
    d = attrs["delta"]
    g = xp.where(xp.abs(r) <= d, r, d * xp.sign(r)) * dout
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = -g
    if "Y@GRAD" in want:
        res["Y@GRAD"] = g
    return res


def _kldiv_scale(attrs, x) -> float:
    red = attrs["reduction"]
    return 1.0 / x.shape[0] if red == "batchmean" else 1.0 / x.size if red == "mean" else 1.0


@kernel("kldiv_loss")
def kldiv_loss(xp, ins, attrs, want):
    x, t = ins["X"], ins["Target"]
    pos = t > 0
    loss = xp.where(pos, t * (xp.log(xp.where(pos, t, 1)) - x), 0).astype(x.dtype, copy=False)
    if attrs["reduction"] == "none":
        return {"Loss": loss}
    return {"Loss": (loss.sum() * _kldiv_scale(attrs, x)).reshape(1).astype(x.dtype)}


@kernel("kldiv_loss_grad")
def kldiv_loss_grad(xp, ins, attrs, want):
    x, t, dl = ins["X"], ins["Target"], ins["Loss@GRAD"]
    g = xp.where(t > 0, -t, 0) * (dl if attrs["reduction"] == "none" else dl.reshape(()))
    return {"X@GRAD": (g * _kldiv_scale(attrs, x)).astype(x.dtype, copy=False)}


@kernel("margin_rank_loss")
def margin_rank_loss(xp, ins, attrs, want):
    out = xp.maximum(-ins["Label"] * (ins["X1"] - ins["X2"]) + attrs["margin"], 0)
    return {"Out": out, "Activated": (out > 0).astype(out.dtype)}


@kernel("margin_rank_loss_grad")
def margin_rank_loss_grad(xp, ins, attrs, want):
    g = ins["Out@GRAD"] * ins["Activated"] * ins["Label"]
    res = {}
    if "X1@GRAD" in want:
        res["X1@GRAD"] = -g
    if "X2@GRAD" in want:
        res["X2@GRAD"] = g
    return res


@kernel("rank_loss")
def rank_loss(xp, ins, attrs, want):
    o = ins["Left"] - ins["Right"]
    return {"Out": xp.logaddexp(0, o) - ins["Label"] * o}


@kernel("rank_loss_grad")
def rank_loss_grad(xp, ins, attrs, want):
    o = ins["Left"] - ins["Right"]
    g = (_sigmoid(xp, o) - ins["Label"]) * ins["Out@GRAD"]
    res = {}
    if "Left@GRAD" in want:
        res["Left@GRAD"] = g
    if "Right@GRAD" in want:
        res["Right@GRAD"] = -g
    return res


# -- sigmoid cross entropy and its teacher-student variant -------------------------------------

def _sce_mask_norm(xp, label, attrs):
    """(kept, norm): an entry is ignored (loss and gradient 0) when int(label) equals
    ignore_index; normalize divides by the number of entries whose label, as a float, is not
    ignore_index (at least 1e-6). The two tests differ for a fractional label such as -1.5
    with ignore_index -1: ignored, yet counted; fluid 1.8.5 counts so, and spmd follows."""
    ignore = attrs["ignore_index"]
    kept = label.astype(np.int64) != ignore
    norm = max(float((label != ignore).sum()), 1e-6) if attrs["normalize"] else 1.0
    return kept, norm


@kernel("sigmoid_cross_entropy_with_logits")
def sigmoid_cross_entropy_with_logits(xp, ins, attrs, want):
    x, label = ins["X"], ins["Label"]
    kept, norm = _sce_mask_norm(xp, label, attrs)
    loss = xp.maximum(x, 0) - x * label + _softplus_neg_abs(xp, x)
    return {"Out": (xp.where(kept, loss, 0) / norm).astype(x.dtype, copy=False)}


@kernel("sigmoid_cross_entropy_with_logits_grad")
def sigmoid_cross_entropy_with_logits_grad(xp, ins, attrs, want):
    x, label = ins["X"], ins["Label"]
    kept, norm = _sce_mask_norm(xp, label, attrs)
    g = xp.where(kept, (_sigmoid(xp, x) - label) * ins["Out@GRAD"], 0) / norm
    return {"X@GRAD": g.astype(x.dtype, copy=False)}


@kernel("teacher_student_sigmoid_loss")
def teacher_student_sigmoid_loss(xp, ins, attrs, want):
    x, label = ins["X"], ins["Label"]
    # label < -1: no click, no teacher; [-1, 0): click, no teacher; [0, 1): no click, teacher
    # value label; >= 1: click, teacher value label - 1
    base = xp.maximum(x, 0) + _softplus_neg_abs(xp, x)
    click = ((label >= -1) & (label < 0)) | (label >= 1)
    has_teacher = label >= 0
    teacher = xp.where(label >= 1, label - 1, label)
    y = base - x * click + xp.where(has_teacher, base - x * teacher, 0)
    return {"Y": y.astype(x.dtype, copy=False)}


@kernel("teacher_student_sigmoid_loss_grad")
def teacher_student_sigmoid_loss_grad(xp, ins, attrs, want):
    x, label = ins["X"], ins["Label"]
    pred = _sigmoid(xp, x)
    g = xp.where(label < -1, pred, xp.where(label < 0, pred - 1, 2 * pred - label))
    # fluid passes no gradient through a logit outside [soft_max_lower_bound, up_bound]
    outside = (x > attrs["soft_max_up_bound"]) | (x < attrs["soft_max_lower_bound"])
    return {"X@GRAD": (xp.where(outside, 0, g) * ins["Y@GRAD"]).astype(x.dtype, copy=False)}


# -- log_loss, smooth_l1_loss, label_smooth, sigmoid_focal_loss ----------------------------------

@kernel("log_loss")
def log_loss(xp, ins, attrs, want):
    p, y, eps = ins["Predicted"], ins["Labels"], attrs["epsilon"]
    return {"Loss": -y * xp.log(p + eps) - (1 - y) * xp.log(1 - p + eps)}


@kernel("log_loss_grad")
def log_loss_grad(xp, ins, attrs, want):
    p, y, eps = ins["Predicted"], ins["Labels"], attrs["epsilon"]
    g = (-y / (p + eps) + (1 - y) / (1 - p + eps)) * ins["Loss@GRAD"]
    return {"Predicted@GRAD": g}


def _smooth_l1_weights(ins):
    """(inside, outside): both given, or both None (the op definition refuses one alone)."""
    return ins.get("InsideWeight"), ins.get("OutsideWeight")


@kernel("smooth_l1_loss")
def smooth_l1_loss(xp, ins, attrs, want):
    x = ins["X"]
    inside, outside = _smooth_l1_weights(ins)
    diff = x - ins["Y"]
    if inside is not None:
        diff = diff * inside
    s2 = attrs["sigma"] ** 2
    a = xp.abs(diff)
    err = xp.where(a < 1.0 / s2, 0.5 * diff * diff * s2, a - 0.5 / s2)
    if outside is not None:
        err = err * outside
    return {"Diff": diff, "Out": err.reshape(x.shape[0], -1).sum(axis=1, keepdims=True)}


@kernel("smooth_l1_loss_grad")
def smooth_l1_loss_grad(xp, ins, attrs, want):
    diff, dout = ins["Diff"], ins["Out@GRAD"]
    inside, outside = _smooth_l1_weights(ins)
    s2 = attrs["sigma"] ** 2
    g = xp.where(xp.abs(diff) < 1.0 / s2, s2 * diff, xp.sign(diff))
    if inside is not None:
        g = g * inside * outside
    g = g * dout.reshape((-1,) + (1,) * (diff.ndim - 1))
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = g
    if "Y@GRAD" in want:
        res["Y@GRAD"] = -g
    return res


@kernel("label_smooth")
def label_smooth(xp, ins, attrs, want):
    x, eps = ins["X"], attrs["epsilon"]
    prior = ins.get("PriorDist")
    mix = eps / x.shape[-1] if prior is None else eps * prior.reshape(-1)
    return {"Out": ((1 - eps) * x + mix).astype(x.dtype, copy=False)}


@kernel("label_smooth_grad")
def label_smooth_grad(xp, ins, attrs, want):
    return {"X@GRAD": (1 - attrs["epsilon"]) * ins["Out@GRAD"]}


def _focal_parts(xp, ins, attrs):
    x, label = ins["X"], ins["Label"].reshape(-1, 1)
    cls = xp.arange(1, x.shape[1] + 1)[None, :]
    pos = (label == cls).astype(x.dtype)  # column j is class j + 1; 0 is background
    neg = ((label != -1) & (label != cls)).astype(x.dtype)
    fg = max(int(ins["FgNum"].reshape(-1)[0]), 1)
    alpha = attrs["alpha"]
    return x, pos * (alpha / fg), neg * ((1 - alpha) / fg), _sigmoid(xp, x)


@kernel("sigmoid_focal_loss")
def sigmoid_focal_loss(xp, ins, attrs, want):
    x, w_pos, w_neg, p = _focal_parts(xp, ins, attrs)
    gamma = attrs["gamma"]
    tiny = np.finfo(np.float32).tiny  # fluid's FLT_MIN guard on log(p)
    log_1mp = -xp.maximum(x, 0) - _softplus_neg_abs(xp, x)  # log(1 - p), stably
    out = (-w_pos * (1 - p) ** gamma * xp.log(xp.maximum(p, tiny))
           - w_neg * p ** gamma * log_1mp)
    return {"Out": out.astype(x.dtype, copy=False)}


@kernel("sigmoid_focal_loss_grad")
def sigmoid_focal_loss_grad(xp, ins, attrs, want):
    x, w_pos, w_neg, p = _focal_parts(xp, ins, attrs)
    gamma = attrs["gamma"]
    tiny = np.finfo(np.float32).tiny
    log_1mp = -xp.maximum(x, 0) - _softplus_neg_abs(xp, x)
    d_pos = (1 - p) ** gamma * (1 - p - p * gamma * xp.log(xp.maximum(p, tiny)))
    d_neg = p ** gamma * (log_1mp * (1 - p) * gamma - p)
    g = (-w_pos * d_pos - w_neg * d_neg) * ins["Out@GRAD"]
    return {"X@GRAD": g.astype(x.dtype, copy=False)}
