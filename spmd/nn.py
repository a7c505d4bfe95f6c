"""paddle.nn's static-graph part: `functional`, `initializer` and the gradient-clip classes."""
from .layers import functional
from .layers import nn_initializer as initializer
from .optimizer.paddle_names import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue

__all__ = ["ClipGradByGlobalNorm", "ClipGradByNorm", "ClipGradByValue", "functional",
           "initializer"]
