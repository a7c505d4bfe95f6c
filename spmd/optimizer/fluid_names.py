"""The fluid 1.8 names: fluid.optimizer (SGD, Momentum, Adam, Adagrad, DecayedAdagrad, RMSProp,
Adadelta, Adamax, Ftrl, Lamb, LarsMomentum, Dpsgd and their *Optimizer spellings,
LookaheadOptimizer, RecomputeOptimizer, ExponentialMovingAverage, ModelAverage, Optimizer, and
DGCMomentumOptimizer and PipelineOptimizer, which raise with what to use instead),
fluid.regularizer (L1Decay, L2Decay, L1DecayRegularizer, L2DecayRegularizer,
append_regularization_ops) and fluid.clip (GradientClipByValue, GradientClipByNorm,
GradientClipByGlobalNorm, ErrorClipByValue, set_gradient_clip).

>>> opt = MomentumOptimizer(learning_rate=0.1, momentum=0.9,
...                         regularization=L2DecayRegularizer(regularization_coeff=1e-4))
"""
# ruff: noqa: F822 - __all__ names are resolved by the module __getattr__ below
from __future__ import annotations

from .. import lazy as _lazy

_MODULES = {
    ".adaptive": (
        "Adadelta", "AdadeltaOptimizer", "Adagrad", "AdagradOptimizer", "Adamax",
        "AdamaxOptimizer", "DecayedAdagrad", "DecayedAdagradOptimizer", "Ftrl", "FtrlOptimizer",
        "Lamb", "LambOptimizer", "LarsMomentum", "LarsMomentumOptimizer", "RMSProp",
        "RMSPropOptimizer"),
    ".averaging": ("ExponentialMovingAverage", "LookaheadOptimizer", "ModelAverage"),
    ".clip": (
        "BaseErrorClipAttr", "ClipByGlobalNorm", "ClipByNorm", "ClipByValue",
        "ErrorClipByValue", "GradientClipBase", "GradientClipByGlobalNorm",
        "GradientClipByNorm", "GradientClipByValue", "append_gradient_clip_ops",
        "error_clip_callback", "set_gradient_clip"),
    ".dpsgd": ("Dpsgd", "DpsgdOptimizer"),
    ".optimizer": (
        "SGD", "Adam", "AdamOptimizer", "Momentum", "MomentumOptimizer", "Optimizer",
        "SGDOptimizer"),
    ".regularizer": (
        "L1DecayRegularizer", "L2DecayRegularizer", "WeightDecayRegularizer",
        "append_regularization_ops"),
    ".wrappers": ("DGCMomentumOptimizer", "PipelineOptimizer", "RecomputeOptimizer"),
}
# each name is imported from its module at its first use (an SGD program loads no adaptive
# optimizer); fluid.regularizer.L2Decay is L2DecayRegularizer (argument
# `regularization_coeff`), unlike paddle.regularizer.L2Decay (argument `coeff`)
__getattr__, __dir__ = _lazy.attach(__name__, {
    **{name: f"{module}:{name}" for module, names in _MODULES.items() for name in names},
    "L1Decay": ".regularizer:L1DecayRegularizer",
    "L2Decay": ".regularizer:L2DecayRegularizer",
})

# what goes into fluid.optimizer, fluid.regularizer and fluid.clip respectively
OPTIMIZER_NAMES = (
    "Adadelta", "AdadeltaOptimizer", "Adagrad", "AdagradOptimizer", "Adam", "AdamOptimizer",
    "Adamax", "AdamaxOptimizer", "DGCMomentumOptimizer", "DecayedAdagrad",
    "DecayedAdagradOptimizer", "Dpsgd", "DpsgdOptimizer", "ExponentialMovingAverage", "Ftrl",
    "FtrlOptimizer", "Lamb", "LambOptimizer", "LarsMomentum", "LarsMomentumOptimizer",
    "LookaheadOptimizer", "ModelAverage", "Momentum", "MomentumOptimizer", "Optimizer",
    "PipelineOptimizer", "RMSProp", "RMSPropOptimizer", "RecomputeOptimizer", "SGD",
    "SGDOptimizer")
REGULARIZER_NAMES = ("L1Decay", "L1DecayRegularizer", "L2Decay", "L2DecayRegularizer",
                     "WeightDecayRegularizer", "append_regularization_ops")
CLIP_NAMES = ("BaseErrorClipAttr", "ClipByGlobalNorm", "ClipByNorm", "ClipByValue",
              "ErrorClipByValue", "GradientClipBase", "GradientClipByGlobalNorm",
              "GradientClipByNorm", "GradientClipByValue", "append_gradient_clip_ops",
              "error_clip_callback", "set_gradient_clip")

__all__ = [
    "Adadelta", "AdadeltaOptimizer", "Adagrad", "AdagradOptimizer", "Adam", "AdamOptimizer",
    "Adamax", "AdamaxOptimizer", "BaseErrorClipAttr", "ClipByGlobalNorm", "ClipByNorm",
    "ClipByValue", "DGCMomentumOptimizer", "DecayedAdagrad", "DecayedAdagradOptimizer", "Dpsgd",
    "DpsgdOptimizer", "ErrorClipByValue", "ExponentialMovingAverage", "Ftrl", "FtrlOptimizer",
    "GradientClipBase", "GradientClipByGlobalNorm", "GradientClipByNorm", "GradientClipByValue",
    "L1Decay", "L1DecayRegularizer", "L2Decay", "L2DecayRegularizer", "Lamb", "LambOptimizer",
    "LarsMomentum", "LarsMomentumOptimizer", "LookaheadOptimizer", "ModelAverage", "Momentum",
    "MomentumOptimizer", "Optimizer", "PipelineOptimizer", "RMSProp", "RMSPropOptimizer",
    "RecomputeOptimizer", "SGD", "SGDOptimizer", "WeightDecayRegularizer",
    "append_gradient_clip_ops", "append_regularization_ops", "error_clip_callback",
    "set_gradient_clip",
]
