"""fluid.layers: the layer builders (spmd.layers.FLUID_LAYERS_NAMES)."""
from ..layers import *  # noqa: F401,F403
from ..layers import FLUID_LAYERS_NAMES

__all__ = list(FLUID_LAYERS_NAMES)
