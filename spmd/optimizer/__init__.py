"""Optimizers (SGD, Momentum, Adam), regularizers and gradient clipping.

Two faces over the same classes: `spmd.optimizer.fluid_names` (fluid 1.8 names and arguments)
and `spmd.optimizer.paddle_names` (paddle 2.x names and arguments).

>>> from spmd.optimizer import fluid_names as fluid_opt
>>> opt = fluid_opt.SGD(learning_rate=0.1)
"""
from . import fluid_names, paddle_names
from .clip import (
    GradientClipBase,
    GradientClipByGlobalNorm,
    GradientClipByNorm,
    GradientClipByValue,
)
from .optimizer import AdamOptimizer, MomentumOptimizer, Optimizer, SGDOptimizer
from .regularizer import (
    L1DecayRegularizer,
    L2DecayRegularizer,
    WeightDecayRegularizer,
    append_regularization_ops,
)

__all__ = ["AdamOptimizer", "GradientClipBase", "GradientClipByGlobalNorm", "GradientClipByNorm",
           "GradientClipByValue", "L1DecayRegularizer", "L2DecayRegularizer",
           "MomentumOptimizer", "Optimizer", "SGDOptimizer", "WeightDecayRegularizer",
           "append_regularization_ops", "fluid_names", "paddle_names"]
