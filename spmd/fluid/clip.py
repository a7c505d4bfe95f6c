"""fluid.clip: gradient clipping by value, by norm, by global norm; error clipping;
set_gradient_clip."""
from .. import lazy as _lazy
from ..optimizer.fluid_names import CLIP_NAMES as _NAMES

# imported at first use from spmd.optimizer.fluid_names (itself lazy)
__getattr__, __dir__ = _lazy.attach(__name__, {
    name: f"spmd.optimizer.fluid_names:{name}" for name in _NAMES})

__all__ = list(_NAMES)
