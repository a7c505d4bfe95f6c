"""paddle.nn's static-graph part: `functional`, `initializer`, the gradient-clip classes, the
`Layer` base and `SyncBatchNorm`."""
from .layers import functional
from .layers import nn_initializer as initializer
from .layers.nn_layers import Layer, SyncBatchNorm
from .optimizer.paddle_names import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue

__all__ = ["ClipGradByGlobalNorm", "ClipGradByNorm", "ClipGradByValue", "Layer",
           "SyncBatchNorm", "functional", "initializer"]
