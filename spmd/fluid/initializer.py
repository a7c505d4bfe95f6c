"""fluid.initializer: Constant, Uniform, Normal, TruncatedNormal, Xavier, MSRA (and *Initializer)."""
from ..layers.initializer import *  # noqa: F401,F403
