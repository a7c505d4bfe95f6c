"""fluid.dygraph.learning_rate_scheduler: dygraph-only schedule objects (fluid 1.8's static
optimizers refuse them too); constructing one raises, naming the fluid.layers schedule.

>>> from spmd.fluid.dygraph.learning_rate_scheduler import PiecewiseDecay
"""
from __future__ import annotations

from ._static_only import refusing_class

__all__ = ["NoamDecay", "PiecewiseDecay", "NaturalExpDecay", "ExponentialDecay",
           "InverseTimeDecay", "PolynomialDecay", "CosineDecay", "LinearLrWarmup",
           "ReduceLROnPlateau", "StepDecay", "MultiStepDecay", "LambdaDecay",
           "LearningRateDecay"]


class LearningRateDecay:
    """Base class of the dygraph schedules; constructing a schedule raises."""


_FEED = "a float fed each step as a persistable [1] learning-rate variable"
NoamDecay = refusing_class("NoamDecay", "fluid.layers.noam_decay", LearningRateDecay)
PiecewiseDecay = refusing_class("PiecewiseDecay", "fluid.layers.piecewise_decay",
                                LearningRateDecay)
NaturalExpDecay = refusing_class("NaturalExpDecay", "fluid.layers.natural_exp_decay",
                                 LearningRateDecay)
ExponentialDecay = refusing_class("ExponentialDecay", "fluid.layers.exponential_decay",
                                  LearningRateDecay)
InverseTimeDecay = refusing_class("InverseTimeDecay", "fluid.layers.inverse_time_decay",
                                  LearningRateDecay)
PolynomialDecay = refusing_class("PolynomialDecay", "fluid.layers.polynomial_decay",
                                 LearningRateDecay)
CosineDecay = refusing_class("CosineDecay", "fluid.layers.cosine_decay", LearningRateDecay)
LinearLrWarmup = refusing_class("LinearLrWarmup", "fluid.layers.linear_lr_warmup",
                                LearningRateDecay)
ReduceLROnPlateau = refusing_class("ReduceLROnPlateau", _FEED, LearningRateDecay)
StepDecay = refusing_class("StepDecay", "fluid.layers.piecewise_decay", LearningRateDecay)
MultiStepDecay = refusing_class("MultiStepDecay", "fluid.layers.piecewise_decay",
                                LearningRateDecay)
LambdaDecay = refusing_class("LambdaDecay", _FEED, LearningRateDecay)
