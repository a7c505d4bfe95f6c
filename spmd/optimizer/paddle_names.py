"""The paddle 2.x names: paddle.optimizer.{SGD, Momentum, Adam}, paddle.regularizer.{L1Decay,
L2Decay}, paddle.nn.{ClipGradByValue, ClipGradByNorm, ClipGradByGlobalNorm}.

They build the same ops as the fluid optimizers; only the constructor arguments differ:
`parameters` for `parameter_list`, `weight_decay` (a float means L2Decay(float)) for
`regularization`.

>>> opt = Adam(learning_rate=0.001, weight_decay=1e-4, grad_clip=ClipGradByGlobalNorm(1.0))
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from .clip import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue
from .optimizer import AdamOptimizer, MomentumOptimizer, Optimizer, SGDOptimizer
from .regularizer import L1Decay, L2Decay, WeightDecayRegularizer

__all__ = ["SGD", "Adam", "ClipGradByGlobalNorm", "ClipGradByNorm", "ClipGradByValue",
           "L1Decay", "L2Decay", "Momentum", "Optimizer"]


def _weight_decay(value, where: str):
    """paddle 2.x `weight_decay`: None, a float (L2Decay(float)) or a regularizer."""
    if value is None or isinstance(value, WeightDecayRegularizer):
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return L2Decay(float(value))
    raise InvalidArgumentError(
        f"{where}: weight_decay must be a float, L2Decay/L1Decay or None, got {value!r}"
    )


class _Paddle2Minimize:
    """paddle 2.x spells minimize's parameter list `parameters`."""

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        return super().minimize(loss, startup_program, parameters, no_grad_set)


class SGD(_Paddle2Minimize, SGDOptimizer):
    """paddle.optimizer.SGD: param -= lr * grad.

    >>> opt = SGD(learning_rate=0.1, weight_decay=0.01)
    """

    def __init__(self, learning_rate=0.001, parameters=None, weight_decay=None, grad_clip=None,
                 name=None):
        super().__init__(learning_rate, parameter_list=parameters,
                         regularization=_weight_decay(weight_decay, "SGD"), grad_clip=grad_clip,
                         name=name)


class Momentum(_Paddle2Minimize, MomentumOptimizer):
    """paddle.optimizer.Momentum: velocity = momentum * velocity + grad; param -= lr * velocity.

    >>> opt = Momentum(learning_rate=0.1, momentum=0.9, use_nesterov=True)
    """

    def __init__(self, learning_rate=0.001, momentum=0.9, parameters=None, use_nesterov=False,
                 weight_decay=None, grad_clip=None, name=None):
        super().__init__(learning_rate, momentum, parameter_list=parameters,
                         use_nesterov=use_nesterov,
                         regularization=_weight_decay(weight_decay, "Momentum"),
                         grad_clip=grad_clip, name=name)


class Adam(_Paddle2Minimize, AdamOptimizer):
    """paddle.optimizer.Adam, with fluid 1.8's adam op update.

    >>> opt = Adam(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8)
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 parameters=None, weight_decay=None, grad_clip=None, name=None,
                 lazy_mode=False):
        super().__init__(learning_rate, beta1, beta2, epsilon, parameter_list=parameters,
                         regularization=_weight_decay(weight_decay, "Adam"),
                         grad_clip=grad_clip, name=name, lazy_mode=lazy_mode)
