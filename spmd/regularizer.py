"""paddle.regularizer: L1Decay(coeff) and L2Decay(coeff), paddle 2.x's spellings of fluid's
weight-decay regularizers, for an optimizer's `weight_decay` or ParamAttr(regularizer=...)
(which wins over the optimizer's for that parameter).

>>> import spmd as paddle
>>> reg = paddle.regularizer.L2Decay(coeff=1e-4)
"""
from __future__ import annotations

from .optimizer.regularizer import L1Decay, L2Decay

__all__ = ["L1Decay", "L2Decay"]
