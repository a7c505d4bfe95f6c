"""Op definitions: the reductions: mean, reduce_sum / mean / max / min / prod,
squared_l2_norm (differentiable) and the boolean reduce_all / reduce_any (no gradient).

They share fluid's reduce attributes (`dim`, `keep_dim`, `reduce_all`) and output shapes.

>>> # OP_DEFS["reduce_any"].grad is None
"""
from __future__ import annotations

from .registry import define_op


def reduce_out_shape(shape, dims, keep_dim: bool, reduce_all: bool) -> tuple:
    """fluid 1.8's reduce output shape; `dims` already in [0, rank). Reducing every dim without
    keep_dim gives [1], not a scalar."""
    rank = len(shape)
    if reduce_all or not dims:
        return (1,) * rank if keep_dim else (1,)
    if keep_dim:
        return tuple(1 if i in dims else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in dims) or (1,)


def _reduce_infer(ctx):
    x = ctx.input("X")
    rank = len(x.shape)
    dims = ctx.attr("dim")
    for d in dims:
        ctx.check(-rank <= d < rank,
                  f"dim {d} is out of range for X{list(x.shape)}: expected -{rank} <= dim < {rank}")
    norm = [d + rank if d < 0 else d for d in dims]
    ctx.check(len(set(norm)) == len(norm),
              f"dim {dims} names an axis twice (as normalized: {norm}) for X{list(x.shape)}")
    ctx.set_output("Out", reduce_out_shape(x.shape, set(norm), ctx.attr("keep_dim"),
                                           ctx.attr("reduce_all")), x.dtype)


REDUCE_ATTRS = {"dim": ("ints", [0]), "keep_dim": ("bool", False), "reduce_all": ("bool", False)}

# min compares X with Out; prod divides Out by X (and handles zeros from X alone)
define_op("reduce_min", inputs=["X"], outputs=["Out"], attrs=REDUCE_ATTRS,
          grad_uses=("X", "Out"))(_reduce_infer)
define_op("reduce_prod", inputs=["X"], outputs=["Out"], attrs=REDUCE_ATTRS,
          grad_uses=("X", "Out"))(_reduce_infer)


def _bool_reduce_infer(ctx):
    x = ctx.input("X")
    ctx.check(x.dtype == "bool",
              f"X '{x.name}' is {x.dtype}; {ctx.opdef.type} takes bool tensors (compare or cast "
              f"first, e.g. layers.cast(x, 'bool'))")
    _reduce_infer(ctx)


for _t in ("reduce_all", "reduce_any"):
    define_op(_t, inputs=["X"], outputs=["Out"], attrs=REDUCE_ATTRS,
              grad=None)(_bool_reduce_infer)


# sum and mean gradients need only X's shape (no-need-buffer, as fluid's); max compares X with Out
define_op("reduce_sum", inputs=["X"], outputs=["Out"], attrs=REDUCE_ATTRS,
          grad_uses=("X",), grad_no_need_buffer=("X",))(_reduce_infer)


define_op("reduce_mean", inputs=["X"], outputs=["Out"], attrs=REDUCE_ATTRS,
          grad_uses=("X",), grad_no_need_buffer=("X",))(_reduce_infer)


define_op("reduce_max", inputs=["X"], outputs=["Out"], attrs=REDUCE_ATTRS,
          grad_uses=("X", "Out"))(_reduce_infer)


# mean_grad reads X only for its shape, size and dtype (fluid: MeanGradNoNeedBufferVarsInferer)
@define_op("mean", inputs=["X"], outputs=["Out"], grad_uses=("X",), grad_no_need_buffer=("X",))
def _mean(ctx):
    ctx.set_output("Out", (1,), ctx.input("X").dtype)  # fluid 1.8: mean gives shape [1]


@define_op("squared_l2_norm", inputs=["X"], outputs=["Out"], grad_uses=("X",))
def _squared_l2_norm(ctx):
    ctx.set_output("Out", (1,), ctx.input("X").dtype)
