"""fluid.layers: the layer builders (spmd.layers.FLUID_LAYERS_NAMES), and the submodule
`collective` (`from paddle.fluid.layers import collective`)."""
from ...layers import *  # noqa: F401,F403
from ...layers import (
    FLUID_LAYERS_NAMES,
    learning_rate_scheduler,  # noqa: F401 - its _decay_step_counter
)
from . import collective  # noqa: F401 - fluid.layers.collective

__all__ = list(FLUID_LAYERS_NAMES)
