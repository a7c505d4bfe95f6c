"""Optimizers, learning-rate schedulers, regularizers and gradient clipping.

This package's top level is paddle 2.x's `paddle.optimizer` (`import spmd as paddle` makes it
so): SGD, Momentum, Adam, AdamW, Adagrad, RMSProp, Adadelta, Adamax and NAdam take 2.x
arguments (`parameters`, `weight_decay`), and `paddle.optimizer.lr` holds the 2.x schedulers.
fluid 1.8's names and arguments are in `spmd.optimizer.fluid_names`, re-exported as
`spmd.fluid.optimizer`, `spmd.fluid.regularizer` and `spmd.fluid.clip`.

>>> import spmd as paddle
>>> opt = paddle.optimizer.Adam(learning_rate=0.001, weight_decay=1e-4)
>>> sched = paddle.optimizer.lr.StepDecay(learning_rate=0.1, step_size=10)
"""
from . import fluid_names, lr, paddle_names
from .clip import (
    GradientClipBase,
    GradientClipByGlobalNorm,
    GradientClipByNorm,
    GradientClipByValue,
)
from .optimizer import AdamOptimizer, MomentumOptimizer, SGDOptimizer
from .paddle_names import (
    SGD,
    Adadelta,
    Adagrad,
    Adam,
    Adamax,
    AdamW,
    Momentum,
    NAdam,
    Optimizer,
    RMSProp,
)
from .regularizer import (
    L1DecayRegularizer,
    L2DecayRegularizer,
    WeightDecayRegularizer,
    append_regularization_ops,
)

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamOptimizer", "AdamW", "Adamax",
           "GradientClipBase", "GradientClipByGlobalNorm", "GradientClipByNorm",
           "GradientClipByValue", "L1DecayRegularizer", "L2DecayRegularizer", "Momentum",
           "MomentumOptimizer", "NAdam", "Optimizer", "RMSProp", "SGDOptimizer",
           "WeightDecayRegularizer", "append_regularization_ops", "fluid_names", "lr",
           "paddle_names"]
