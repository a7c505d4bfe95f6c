"""Optimizers (SGD, Momentum, Adam), regularizers and gradient clipping.

This package's top level is paddle 2.x's `paddle.optimizer` (`import spmd as paddle` makes it
so): SGD, Momentum and Adam take 2.x arguments (`parameters`, `weight_decay`). fluid 1.8's names
and arguments are in `spmd.optimizer.fluid_names`, re-exported as `spmd.fluid.optimizer`.

>>> import spmd as paddle
>>> opt = paddle.optimizer.Adam(learning_rate=0.001, weight_decay=1e-4)
"""
from . import fluid_names, paddle_names
from .clip import (
    GradientClipBase,
    GradientClipByGlobalNorm,
    GradientClipByNorm,
    GradientClipByValue,
)
from .optimizer import AdamOptimizer, MomentumOptimizer, SGDOptimizer
from .paddle_names import SGD, Adam, Momentum, Optimizer
from .regularizer import (
    L1DecayRegularizer,
    L2DecayRegularizer,
    WeightDecayRegularizer,
    append_regularization_ops,
)

__all__ = ["SGD", "Adam", "AdamOptimizer", "GradientClipBase", "GradientClipByGlobalNorm",
           "GradientClipByNorm", "GradientClipByValue", "L1DecayRegularizer",
           "L2DecayRegularizer", "Momentum", "MomentumOptimizer", "Optimizer", "SGDOptimizer",
           "WeightDecayRegularizer", "append_regularization_ops", "fluid_names", "paddle_names"]
