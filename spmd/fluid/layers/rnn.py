"""fluid.layers.rnn: fluid 1.8's module of that name (see fluid_modules); the attribute
fluid.layers.rnn stays the rnn function, as in fluid."""
from .fluid_modules import populate

__all__ = populate(globals(), "rnn")
