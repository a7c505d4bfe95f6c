"""fluid.data's module (`from paddle.fluid.data import data`): fluid.data itself; the attribute
fluid.data stays the function, as in fluid 1.8."""
from ..layers.io import fluid_data as data

__all__ = ["data"]
