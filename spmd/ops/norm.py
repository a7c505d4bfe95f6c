"""Op definitions: group_norm, instance_norm and lrn (channel-first; NHWC layers transpose).

group_norm and instance_norm normalize each sample over groups of channels (instance_norm: one
channel per group) with an optional per-channel Scale and Bias; lrn divides each value by a
power of the sum of squares over a window of neighbouring channels.

group_norm's gradient without Scale is fluid 1.8's (not the exact derivative): see
spmd/kernels/norm.py.
"""
from __future__ import annotations

from .registry import define_op


def _check_affine(ctx, c):
    for slot in ("Scale", "Bias"):
        if ctx.has_input(slot):
            v = ctx.input(slot)
            ctx.check(c < 0 or tuple(v.shape) in ((c,), (-1,)),
                      f"{slot} must have shape [{c}] (X's channels), got {list(v.shape)}")


@define_op("group_norm", inputs=["X", "Scale?", "Bias?"], outputs=["Y", "Mean", "Variance"],
           nondiff_outputs=("Mean", "Variance"),
           grad_uses=("X", "Scale", "Bias", "Mean", "Variance"),
           attrs={"epsilon": ("float", 1e-5), "groups": "int",
                  "data_layout": ("str", "NCHW")})
def _group_norm(ctx):
    x, g = ctx.input("X"), ctx.attr("groups")
    ctx.check(len(x.shape) >= 2, f"X must have at least 2 dims, got {list(x.shape)}")
    ctx.check(ctx.attr("data_layout") in ("NCHW", "AnyLayout"),
              f"data_layout must be 'NCHW' here, got {ctx.attr('data_layout')!r}; the "
              f"group_norm layer transposes NHWC input")
    c = x.shape[1]
    ctx.check(g >= 1 and (c < 0 or c % g == 0),
              f"groups={g} must be a positive divisor of X's {c} channels")
    _check_affine(ctx, c)
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("Mean", (x.shape[0], g), x.dtype)
    ctx.set_output("Variance", (x.shape[0], g), x.dtype)


@define_op("instance_norm", inputs=["X", "Scale?", "Bias?"],
           outputs=["Y", "SavedMean", "SavedVariance"],
           nondiff_outputs=("SavedMean", "SavedVariance"),
           grad_uses=("X", "Scale", "Bias", "SavedMean", "SavedVariance"),
           attrs={"epsilon": ("float", 1e-5)})
def _instance_norm(ctx):
    x = ctx.input("X")
    ctx.check(2 <= len(x.shape) <= 5, f"X must have 2 to 5 dims, got {list(x.shape)}")
    eps = ctx.attr("epsilon")
    ctx.check(0.0 <= eps <= 1e-3, f"epsilon must be in [0, 0.001], got {eps}")
    _check_affine(ctx, x.shape[1])
    nc = x.shape[0] * x.shape[1] if min(x.shape[:2]) > 0 else -1
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("SavedMean", (nc,), x.dtype)
    ctx.set_output("SavedVariance", (nc,), x.dtype)


@define_op("lrn", inputs=["X"], outputs=["Out", "MidOut"], nondiff_outputs=("MidOut",),
           grad_uses=("X", "Out", "MidOut"),
           attrs={"n": ("int", 5), "k": ("float", 2.0), "alpha": ("float", 1e-4),
                  "beta": ("float", 0.75), "data_format": ("str", "AnyLayout"),
                  "is_test": ("bool", False), "use_mkldnn": ("bool", False)})
def _lrn(ctx):
    x = ctx.input("X")
    ctx.check(len(x.shape) == 4, f"X must be 4-D NCHW, got {list(x.shape)}")
    ctx.check(ctx.attr("data_format") in ("NCHW", "AnyLayout"),
              f"data_format must be 'NCHW' here, got {ctx.attr('data_format')!r}; the lrn "
              f"layer transposes NHWC input")
    n = ctx.attr("n")
    ctx.check(n > 0 and n % 2 == 1, f"n must be a positive odd int, got {n}")
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("MidOut", x.shape, x.dtype)


@define_op("data_norm",
           inputs=["X", "BatchSize", "BatchSum", "BatchSquareSum", "scale_w?", "bias?"],
           outputs=["Y", "Means", "Scales"], nondiff_outputs=("Means", "Scales"),
           grad_uses=("X", "BatchSize", "BatchSum", "BatchSquareSum", "scale_w", "bias",
                      "Means", "Scales"),
           attrs={"epsilon": ("float", 1e-4), "slot_dim": ("int", -1),
                  "sync_stats": ("bool", False), "summary_decay_rate": ("float", 0.9999999),
                  "enable_scale_and_shift": ("bool", False), "data_layout": ("str", "NCHW")})
def _data_norm(ctx):
    """fluid's data_norm: y = (x - BatchSum/BatchSize) * sqrt(BatchSize/BatchSquareSum); its
    'gradients' of the three statistics are the batch's count, sum and centered square sum,
    which the optimizer then applies (fluid's rule)."""
    x = ctx.input("X")
    ctx.check(len(x.shape) == 2, f"X must be 2-D [N, C], got {list(x.shape)}")
    eps = ctx.attr("epsilon")
    ctx.check(0.0 <= eps <= 1e-3, f"epsilon must be in [0, 0.001], got {eps}")
    c = x.shape[1]
    slot = ctx.attr("slot_dim")
    ctx.check(slot <= 0 or c < 0 or c % slot == 0,
              f"slot_dim={slot} must divide X's {c} columns")
    slots = ["BatchSize", "BatchSum", "BatchSquareSum"]
    if ctx.attr("enable_scale_and_shift"):
        ctx.check(ctx.has_input("scale_w") and ctx.has_input("bias"),
                  "enable_scale_and_shift=True needs the scale_w and bias inputs")
        slots += ["scale_w", "bias"]
    for s in slots:
        shape = tuple(ctx.input(s).shape)
        ctx.check(c < 0 or shape in ((c,), (-1,)), f"{s} must be [{c}], got {list(shape)}")
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("Means", (c,), x.dtype)
    ctx.set_output("Scales", (c,), x.dtype)
