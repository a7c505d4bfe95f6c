"""The fluid 1.8 names: fluid.optimizer.{SGD, SGDOptimizer, Momentum, MomentumOptimizer, Adam,
AdamOptimizer, Optimizer}, fluid.regularizer.{L1Decay, L2Decay, L1DecayRegularizer,
L2DecayRegularizer, append_regularization_ops} and fluid.clip.{GradientClipByValue,
GradientClipByNorm, GradientClipByGlobalNorm}.

>>> opt = MomentumOptimizer(learning_rate=0.1, momentum=0.9,
...                         regularization=L2DecayRegularizer(regularization_coeff=1e-4))
"""
from __future__ import annotations

from .clip import (
    GradientClipBase,
    GradientClipByGlobalNorm,
    GradientClipByNorm,
    GradientClipByValue,
)
from .optimizer import (
    SGD,
    Adam,
    AdamOptimizer,
    Momentum,
    MomentumOptimizer,
    Optimizer,
    SGDOptimizer,
)
from .regularizer import (
    L1DecayRegularizer,
    L2DecayRegularizer,
    WeightDecayRegularizer,
    append_regularization_ops,
)

# fluid.regularizer.L2Decay is L2DecayRegularizer (argument `regularization_coeff`), unlike
# paddle.regularizer.L2Decay (argument `coeff`)
L1Decay = L1DecayRegularizer
L2Decay = L2DecayRegularizer

# what goes into fluid.optimizer, fluid.regularizer and fluid.clip respectively
OPTIMIZER_NAMES = ("Adam", "AdamOptimizer", "Momentum", "MomentumOptimizer", "Optimizer", "SGD",
                   "SGDOptimizer")
REGULARIZER_NAMES = ("L1Decay", "L1DecayRegularizer", "L2Decay", "L2DecayRegularizer",
                     "WeightDecayRegularizer", "append_regularization_ops")
CLIP_NAMES = ("GradientClipBase", "GradientClipByGlobalNorm", "GradientClipByNorm",
              "GradientClipByValue")

__all__ = [
    "SGD", "Adam", "AdamOptimizer", "GradientClipBase", "GradientClipByGlobalNorm",
    "GradientClipByNorm", "GradientClipByValue", "L1Decay", "L1DecayRegularizer", "L2Decay",
    "L2DecayRegularizer", "Momentum", "MomentumOptimizer", "Optimizer", "SGDOptimizer",
    "WeightDecayRegularizer", "append_regularization_ops",
]
