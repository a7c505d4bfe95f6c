"""fluid.initializer: Constant, Uniform, Normal, TruncatedNormal, Xavier, MSRA, *Initializer."""
from ..layers.initializer import *  # noqa: F401,F403
