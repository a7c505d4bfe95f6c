"""fluid.layers: the layer builders (spmd.layers.FLUID_LAYERS_NAMES); fluid 1.8's submodules
by their names (`fluid.layers.nn`, `.ops`, `.tensor`, ...: see fluid_modules) and `collective`
(`from paddle.fluid.layers import collective`)."""
from ...layers import *  # noqa: F401,F403
from ...layers import FLUID_LAYERS_NAMES
from . import (  # noqa: F401 - fluid.layers.<module>, as fluid 1.8 has them
    collective,
    control_flow,
    detection,
    distributions,
    io,
    learning_rate_scheduler,
    loss,
    math_op_patch,
    metric_op,
    nn,
    ops,
    sequence_lod,
    tensor,
)

__all__ = list(FLUID_LAYERS_NAMES)
