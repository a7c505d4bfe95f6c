"""fluid.regularizer: L1Decay / L2Decay (regularization_coeff=...)."""
from ..optimizer.fluid_names import (  # noqa: F401
    L1Decay,
    L1DecayRegularizer,
    L2Decay,
    L2DecayRegularizer,
    WeightDecayRegularizer,
    append_regularization_ops,
)

__all__ = [
    "L1Decay", "L1DecayRegularizer", "L2Decay", "L2DecayRegularizer", "WeightDecayRegularizer",
    "append_regularization_ops",
]
