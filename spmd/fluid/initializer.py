"""fluid.initializer: Constant, Uniform, Normal, TruncatedNormal, Xavier, MSRA, Bilinear,
NumpyArrayInitializer and the *Initializer names."""
from ..layers.array_initializer import *  # noqa: F401,F403
from ..layers.initializer import *  # noqa: F401,F403
