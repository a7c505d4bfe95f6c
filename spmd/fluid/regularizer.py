"""fluid.regularizer: L1Decay / L2Decay (regularization_coeff=...)."""
from .. import lazy as _lazy
from ..optimizer.fluid_names import REGULARIZER_NAMES as _NAMES

# imported at first use from spmd.optimizer.fluid_names (itself lazy)
__getattr__, __dir__ = _lazy.attach(__name__, {
    name: f"spmd.optimizer.fluid_names:{name}" for name in _NAMES})

__all__ = list(_NAMES)
