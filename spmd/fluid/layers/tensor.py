"""fluid.layers.tensor: fluid 1.8's module of that name (see fluid_modules)."""
from .fluid_modules import populate

__all__ = populate(globals(), "tensor")
