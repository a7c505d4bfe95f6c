"""Op definitions: parameter update ops (sgd, momentum, adam) and the helpers optimizers use."""
from __future__ import annotations

from .registry import define_op


@define_op("sgd", inputs=["Param", "Grad", "LearningRate"], outputs=["ParamOut"], grad=None)
def _sgd(ctx):
    p, g = ctx.input("Param"), ctx.input("Grad")
    ctx.check(tuple(p.shape) == tuple(g.shape),
              f"Param {p.name}{list(p.shape)} and Grad {g.name}{list(g.shape)} differ in shape")
    ctx.set_output_like("ParamOut", "Param")
