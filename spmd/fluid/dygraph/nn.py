"""fluid.dygraph.nn: the dygraph layer classes. Embedding, LayerNorm, RowConv and
SequenceConv work in a static program as fluid 1.8's (spmd/fluid/dygraph/static_nn.py); each
other one imports, and constructing it raises, naming its static equivalent (Linear ->
fluid.layers.fc, Conv2D -> fluid.layers.conv2d, ...).

>>> from spmd.fluid.dygraph.nn import Linear
"""
from __future__ import annotations

from ._static_only import refusing_class
from .layers import Layer
from .static_nn import Embedding, LayerNorm, RowConv, SequenceConv  # noqa: F401 (as fluid: RowConv, SequenceConv not in __all__)

__all__ = [
    "Conv2D", "Conv3D", "Pool2D", "Linear", "BatchNorm", "Dropout", "Embedding", "GRUUnit",
    "InstanceNorm", "LayerNorm", "NCE", "PRelu", "BilinearTensorProduct", "Conv2DTranspose",
    "Conv3DTranspose", "GroupNorm", "SpectralNorm", "TreeConv", "MSELoss", "L1Loss", "NLLLoss",
    "BCELoss",
]

Conv2D = refusing_class("Conv2D", "fluid.layers.conv2d", Layer)
Conv3D = refusing_class("Conv3D", "fluid.layers.conv3d", Layer)
Pool2D = refusing_class("Pool2D", "fluid.layers.pool2d", Layer)
Linear = refusing_class("Linear", "fluid.layers.fc", Layer)
BatchNorm = refusing_class("BatchNorm", "fluid.layers.batch_norm", Layer)
Dropout = refusing_class("Dropout", "fluid.layers.dropout", Layer)
GRUUnit = refusing_class("GRUUnit", "fluid.layers.gru_unit", Layer)
InstanceNorm = refusing_class("InstanceNorm", "fluid.layers.instance_norm", Layer)
NCE = refusing_class("NCE", "fluid.layers.nce", Layer)
PRelu = refusing_class("PRelu", "fluid.layers.prelu", Layer)
BilinearTensorProduct = refusing_class("BilinearTensorProduct",
                                       "fluid.layers.bilinear_tensor_product", Layer)
Conv2DTranspose = refusing_class("Conv2DTranspose", "fluid.layers.conv2d_transpose", Layer)
Conv3DTranspose = refusing_class("Conv3DTranspose", "fluid.layers.conv3d_transpose", Layer)
GroupNorm = refusing_class("GroupNorm", "fluid.layers.group_norm", Layer)
SpectralNorm = refusing_class("SpectralNorm", "fluid.layers.spectral_norm", Layer)
TreeConv = refusing_class("TreeConv", "fluid.contrib.layers.tree_conv", Layer)
MSELoss = refusing_class("MSELoss", "fluid.layers.mse_loss", Layer)
L1Loss = refusing_class("L1Loss", "fluid.layers.reduce_mean(fluid.layers.abs(x - y))", Layer)
NLLLoss = refusing_class("NLLLoss", "fluid.layers.cross_entropy on probabilities", Layer)
BCELoss = refusing_class("BCELoss", "fluid.layers.log_loss", Layer)
