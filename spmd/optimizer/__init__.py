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
from .. import lazy as _lazy

# each name is imported from its module at its first use, as are the modules fluid_names, lr
# and paddle_names
__getattr__, __dir__ = _lazy.attach(__name__, {
    **{name: f".clip:{name}" for name in (
        "GradientClipBase", "GradientClipByGlobalNorm", "GradientClipByNorm",
        "GradientClipByValue")},
    **{name: f".optimizer:{name}" for name in (
        "AdamOptimizer", "MomentumOptimizer", "SGDOptimizer")},
    **{name: f".paddle_names:{name}" for name in (
        "SGD", "Adadelta", "Adagrad", "Adam", "Adamax", "AdamW", "Momentum", "NAdam",
        "Optimizer", "RMSProp")},
    **{name: f".regularizer:{name}" for name in (
        "L1DecayRegularizer", "L2DecayRegularizer", "WeightDecayRegularizer",
        "append_regularization_ops")},
}, submodules=True)

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamOptimizer", "AdamW", "Adamax",
           "GradientClipBase", "GradientClipByGlobalNorm", "GradientClipByNorm",
           "GradientClipByValue", "L1DecayRegularizer", "L2DecayRegularizer", "Momentum",
           "MomentumOptimizer", "NAdam", "Optimizer", "RMSProp", "SGDOptimizer",
           "WeightDecayRegularizer", "append_regularization_ops", "fluid_names", "lr",
           "paddle_names"]
