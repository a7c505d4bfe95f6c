"""Op definitions: the reductions beyond sum/mean/max (spmd/ops/math.py): reduce_min,
reduce_prod (differentiable) and the boolean reduce_all / reduce_any (no gradient).

They share fluid's reduce attributes (`dim`, `keep_dim`, `reduce_all`) and output shapes.

>>> # OP_DEFS["reduce_any"].grad is None
"""
from __future__ import annotations

from .math import REDUCE_ATTRS, _reduce_infer
from .registry import define_op

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
