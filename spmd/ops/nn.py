"""Op definitions: neural-network ops (softmax and losses, conv, pool, normalization, dropout,
top_k, accuracy). Convolution and pooling are in conv.py, imported at the bottom."""
from __future__ import annotations

import math

from .registry import define_op

INT_DTYPES = ("int32", "int64")
FLOAT_HARD_LABELS = ("float32", "float64")  # class ids in a float variable (_check_hard_label)


def _dims_match(a, b) -> bool:
    """Same rank and equal dims, where -1 (unknown) matches anything."""
    return len(a) == len(b) and all(x == y or x < 0 or y < 0 for x, y in zip(a, b))


def _prod(dims) -> int:
    return -1 if any(d < 0 for d in dims) else math.prod(dims)


def _norm_axis(ctx, axis: int, rank: int, what: str = "axis") -> int:
    ctx.check(-rank <= axis < rank, f"{what}={axis} is out of range for a rank-{rank} input "
                                    f"(expected {-rank} <= {what} < {rank})")
    return axis % rank


def _check_float(ctx, var, slot: str):
    ctx.check(var.dtype in ("float16", "float32", "float64"),
              f"{slot} must be a floating tensor, got dtype {var.dtype}")


@define_op("softmax", inputs=["X"], outputs=["Out"], grad_uses=("Out",),
           attrs={"axis": ("int", -1), "use_cudnn": ("bool", False),
                  "use_mkldnn": ("bool", False), "data_format": ("str", "AnyLayout"),
                  "is_test": ("bool", False)})
def _softmax(ctx):
    x = ctx.input("X")
    _check_float(ctx, x, "X")
    _norm_axis(ctx, ctx.attr("axis"), max(len(x.shape), 1))
    ctx.set_output_like("Out", "X")


def _check_hard_label(ctx, x, label, axis: int):
    """A hard label has X's shape with 1 at `axis` (or, on the last axis, that dim dropped)."""
    # fluid 1.8 checks no label dtype: a float label variable fed int64 ids runs (the kernel
    # then takes whole-number floats as the ids)
    ctx.check(label.dtype in INT_DTYPES or label.dtype in FLOAT_HARD_LABELS,
              f"Label must be int64 (class ids) when soft_label=False, got {label.dtype}")
    want = tuple(x.shape[:axis]) + (1,) + tuple(x.shape[axis + 1:])
    ok = _dims_match(label.shape, want)
    if axis == len(x.shape) - 1:
        ok = ok or _dims_match(label.shape, x.shape[:-1])
    ctx.check(ok, f"Label shape {list(label.shape)} does not match X{list(x.shape)}: expected "
                  f"{list(want)} (class ids along axis {axis})")


def _check_soft_label(ctx, x, label):
    _check_float(ctx, label, "Label")
    ctx.check(_dims_match(label.shape, x.shape),
              f"soft Label must have X's shape {list(x.shape)}, got {list(label.shape)}")


@define_op("cross_entropy", inputs=["X", "Label"], outputs=["Y"], no_grad_inputs=("Label",),
           grad_uses=("X", "Label"),
           attrs={"soft_label": ("bool", False), "ignore_index": ("int", -100)})
def _cross_entropy(ctx):
    x, label = ctx.input("X"), ctx.input("Label")
    _check_float(ctx, x, "X")
    ctx.check(len(x.shape) >= 1, "X must have at least one dim (the classes)")
    if ctx.attr("soft_label"):
        _check_soft_label(ctx, x, label)
    else:
        _check_hard_label(ctx, x, label, len(x.shape) - 1)
    ctx.set_output("Y", _loss_shape(x, label), x.dtype)


def _loss_shape(x, label) -> tuple:
    """fluid's cross-entropy Y: the label's dims with the last one 1; a hard label without
    X's class dim ([N, T] for X [N, T, V]) gives a loss of its own shape."""
    if len(label.shape) == len(x.shape) - 1:
        return tuple(label.shape)
    return tuple(x.shape[:-1]) + (1,)


@define_op("cross_entropy2", inputs=["X", "Label"], outputs=["Y", "XShape", "MatchX"],
           no_grad_inputs=("Label",), nondiff_outputs=("XShape", "MatchX"),
           grad_uses=("Label", "XShape", "MatchX"), attrs={"ignore_index": ("int", -100)})
def _cross_entropy2(ctx):
    """Hard-label cross entropy that keeps only X[label] for the gradient (fluid 1.8's
    layers.cross_entropy uses it when soft_label=False)."""
    x, label = ctx.input("X"), ctx.input("Label")
    _check_float(ctx, x, "X")
    ctx.check(len(x.shape) >= 1, "X must have at least one dim (the classes)")
    _check_hard_label(ctx, x, label, len(x.shape) - 1)
    ctx.set_output("Y", _loss_shape(x, label), x.dtype)
    ctx.set_output("XShape", tuple(x.shape) + (0,), x.dtype)
    ctx.set_output("MatchX", tuple(x.shape[:-1]) + (1,), x.dtype)


@define_op("softmax_with_cross_entropy", inputs=["Logits", "Label"], outputs=["Softmax", "Loss"],
           no_grad_inputs=("Label",), nondiff_outputs=("Softmax",),
           grad_uses=("Label", "Softmax"),
           attrs={"soft_label": ("bool", False), "ignore_index": ("int", -100),
                  "numeric_stable_mode": ("bool", True), "axis": ("int", -1)})
def _softmax_with_cross_entropy(ctx):
    x, label = ctx.input("Logits"), ctx.input("Label")
    _check_float(ctx, x, "Logits")
    axis = _norm_axis(ctx, ctx.attr("axis"), max(len(x.shape), 1))
    if ctx.attr("soft_label"):
        _check_soft_label(ctx, x, label)
    else:
        _check_hard_label(ctx, x, label, axis)
    ctx.set_output("Softmax", x.shape, x.dtype)
    ctx.set_output("Loss", tuple(x.shape[:axis]) + (1,) + tuple(x.shape[axis + 1:]), x.dtype)


@define_op("batch_norm",
           inputs=["X", "Scale", "Bias", "Mean", "Variance", "MomentumTensor?"],
           outputs=["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance",
                    "ReserveSpace?"],
           no_grad_inputs=("Mean", "Variance", "MomentumTensor"),
           nondiff_outputs=("MeanOut", "VarianceOut", "SavedMean", "SavedVariance",
                            "ReserveSpace"),
           grad_uses=("X", "Scale", "Bias", "Mean", "Variance", "SavedMean", "SavedVariance"),
           attrs={"momentum": ("float", 0.9), "epsilon": ("float", 1e-5),
                  "is_test": ("bool", False), "data_layout": ("str", "NCHW"),
                  "use_global_stats": ("bool", False),
                  "trainable_statistics": ("bool", False), "use_mkldnn": ("bool", False),
                  "fuse_with_relu": ("bool", False)})
def _batch_norm(ctx):
    x = ctx.input("X")
    _check_float(ctx, x, "X")
    layout = ctx.attr("data_layout")
    ctx.check(layout in ("NCHW", "NHWC"), f"data_layout must be 'NCHW' or 'NHWC', got {layout!r}")
    ctx.check(2 <= len(x.shape) <= 5, f"X must have 2 to 5 dims, got shape {list(x.shape)}")
    eps = ctx.attr("epsilon")
    ctx.check(0.0 <= eps <= 1e-3, f"epsilon must be in [0, 0.001], got {eps}")
    ctx.check(not ctx.attr("fuse_with_relu"),
              "fuse_with_relu=True is not supported; apply relu after batch_norm")
    c = x.shape[1] if layout == "NCHW" else x.shape[-1]
    for slot in ("Scale", "Bias", "Mean", "Variance"):
        v = ctx.input(slot)
        ctx.check(_dims_match(v.shape, (c,)),
                  f"{slot} must have shape [{c}] (the channels of X{list(x.shape)} in "
                  f"{layout}), got {list(v.shape)}")
    if ctx.has_input("MomentumTensor"):
        m = ctx.input("MomentumTensor")
        ctx.check(_dims_match(m.shape, (1,)), f"MomentumTensor must have shape [1], got "
                                              f"{list(m.shape)}")
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("MeanOut", (c,), ctx.input("Mean").dtype)
    ctx.set_output("VarianceOut", (c,), ctx.input("Variance").dtype)
    ctx.set_output("SavedMean", (c,), x.dtype)
    ctx.set_output("SavedVariance", (c,), x.dtype)
    ctx.set_output("ReserveSpace", (0,), x.dtype)


@define_op("layer_norm", inputs=["X", "Scale?", "Bias?"], outputs=["Y", "Mean", "Variance"],
           nondiff_outputs=("Mean", "Variance"),
           grad_uses=("X", "Scale", "Bias", "Mean", "Variance"),
           attrs={"epsilon": ("float", 1e-5), "begin_norm_axis": ("int", 1),
                  "use_mkldnn": ("bool", False), "is_test": ("bool", False)})
def _layer_norm(ctx):
    x = ctx.input("X")
    _check_float(ctx, x, "X")
    axis = ctx.attr("begin_norm_axis")
    ctx.check(0 < axis < len(x.shape),
              f"begin_norm_axis={axis} must be in [1, {len(x.shape) - 1}] for X{list(x.shape)}")
    left, right = _prod(x.shape[:axis]), _prod(x.shape[axis:])
    for slot in ("Scale", "Bias"):
        if ctx.has_input(slot):
            v = ctx.input(slot)
            ctx.check(_dims_match(v.shape, (right,)),
                      f"{slot} must have shape [{right}] (the product of X{list(x.shape)}'s dims "
                      f"from begin_norm_axis={axis}), got {list(v.shape)}")
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("Mean", (left,), x.dtype)
    ctx.set_output("Variance", (left,), x.dtype)


DROPOUT_IMPLEMENTATIONS = ("downgrade_in_infer", "upscale_in_train")


@define_op("dropout", inputs=["X", "Seed?"], outputs=["Out", "Mask"], nondiff_outputs=("Mask",),
           grad_uses=("Mask",), random=True, no_grad_inputs=("Seed",),
           attrs={"dropout_prob": ("float", 0.5), "is_test": ("bool", False),
                  "fix_seed": ("bool", False), "seed": ("int", 0),
                  "dropout_implementation": ("str", "downgrade_in_infer")})
def _dropout(ctx):
    x = ctx.input("X")
    _check_float(ctx, x, "X")
    p = ctx.attr("dropout_prob")
    ctx.check(0.0 <= p <= 1.0, f"dropout_prob must be in [0, 1], got {p}")
    impl = ctx.attr("dropout_implementation")
    ctx.check(impl in DROPOUT_IMPLEMENTATIONS,
              f"dropout_implementation must be one of {list(DROPOUT_IMPLEMENTATIONS)}, "
              f"got {impl!r}")
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("Mask", x.shape, "uint8")


@define_op("top_k", inputs=["X", "K?"], outputs=["Out", "Indices"], no_grad_inputs=("K",),
           nondiff_outputs=("Indices",), grad_uses=("X", "Indices"), attrs={"k": ("int", 1)})
def _top_k(ctx):
    x = ctx.input("X")
    ctx.check(len(x.shape) >= 1, "X must have at least one dim")
    if ctx.has_input("K"):
        k = -1  # known only when the program runs
    else:
        k = ctx.attr("k")
        n = x.shape[-1]
        ctx.check(k >= 1, f"k must be >= 1, got {k}")
        ctx.check(n < 0 or k <= n, f"k={k} is larger than X's last dim {n} (X{list(x.shape)})")
    ctx.set_output("Out", tuple(x.shape[:-1]) + (k,), x.dtype)
    ctx.set_output("Indices", tuple(x.shape[:-1]) + (k,), "int64")


@define_op("accuracy", inputs=["Out", "Indices", "Label"],
           outputs=["Accuracy", "Correct", "Total"], grad=None)
def _accuracy(ctx):
    out, idx, label = ctx.input("Out"), ctx.input("Indices"), ctx.input("Label")
    ctx.check(len(idx.shape) == 2, f"Indices must be [N, k], got {list(idx.shape)}")
    ctx.check(_dims_match(out.shape, idx.shape),
              f"Out{list(out.shape)} and Indices{list(idx.shape)} must have the same shape")
    ctx.check(idx.dtype in INT_DTYPES, f"Indices must be int64, got {idx.dtype}")
    ctx.check(label.dtype in INT_DTYPES, f"Label must be int64, got {label.dtype}")
    ctx.check(_dims_match(label.shape, (idx.shape[0], 1)),
              f"Label must be [N, 1] = [{idx.shape[0]}, 1], got {list(label.shape)}")
    ctx.set_output("Accuracy", (1,), "float32")
    ctx.set_output("Correct", (1,), "int32")
    ctx.set_output("Total", (1,), "int32")


@define_op("square_error_cost", inputs=["X", "Y"], outputs=["Out"], grad_uses=("X", "Y"))
def _square_error_cost(ctx):
    """(X - Y)^2 elementwise, Y broadcast into X right-aligned as numpy does (fluid builds it
    from elementwise_sub + square; one op here saves a temporary)."""
    x, y = ctx.input("X"), ctx.input("Y")
    ctx.check(len(y.shape) <= len(x.shape) and all(
        b in (a, 1) or -1 in (a, b) for a, b in zip(x.shape[::-1], y.shape[::-1])),
        f"Y{list(y.shape)} does not broadcast into X{list(x.shape)}")
    ctx.check(x.dtype == y.dtype, f"X is {x.dtype} but Y is {y.dtype}")
    ctx.set_output("Out", x.shape, x.dtype)
