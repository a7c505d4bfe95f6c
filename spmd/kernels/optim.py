"""Kernels: parameter update ops (sgd, momentum, adam) and the helpers optimizers use."""
from __future__ import annotations

from .registry import kernel


@kernel("sgd")
def sgd(xp, ins, attrs, want):
    p, g, lr = ins["Param"], ins["Grad"], ins["LearningRate"]
    return {"ParamOut": p - lr.reshape(()).astype(p.dtype) * g}
