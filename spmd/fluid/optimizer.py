"""fluid.optimizer: fluid 1.8's optimizer names and arguments."""
from .. import lazy as _lazy
from ..optimizer.fluid_names import OPTIMIZER_NAMES as _NAMES

# imported at first use from spmd.optimizer.fluid_names (itself lazy)
__getattr__, __dir__ = _lazy.attach(__name__, {
    **{name: f"spmd.optimizer.fluid_names:{name}" for name in _NAMES},
    # fluid.optimizer imports it from fluid.regularizer, and programs reach it here
    "append_regularization_ops": "spmd.optimizer.regularizer:append_regularization_ops",
})

__all__ = list(_NAMES)
