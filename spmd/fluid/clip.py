"""fluid.clip: gradient clipping by value, by norm, by global norm."""
from ..optimizer.fluid_names import (  # noqa: F401
    GradientClipBase,
    GradientClipByGlobalNorm,
    GradientClipByNorm,
    GradientClipByValue,
)
