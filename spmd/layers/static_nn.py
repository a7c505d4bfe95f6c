"""paddle.static.nn (2.x names) as thin wrappers over the fluid builders.

>>> # h = paddle.static.nn.fc(x, size=128, activation="relu")
"""
from __future__ import annotations

from .conv import conv2d
from .nn import embedding_op
from .nn import fc as _fluid_fc
from .norm import batch_norm, layer_norm
from .tensor import create_parameter

__all__ = ["batch_norm", "conv2d", "create_parameter", "embedding", "fc", "layer_norm"]


def fc(x, size, num_flatten_dims=1, weight_attr=None, bias_attr=None, activation=None,
       name=None):
    """fluid.layers.fc with 2.x argument names (x, weight_attr, activation).

    >>> # y = fc(x, size=10, weight_attr=paddle.ParamAttr(name="w"), bias_attr=False)
    """
    return _fluid_fc(x, size, num_flatten_dims=num_flatten_dims, param_attr=weight_attr,
                     bias_attr=bias_attr, act=activation, name=name)


def embedding(input, size, is_sparse=False, is_distributed=False, padding_idx=None,
              param_attr=None, dtype="float32"):
    """Rows of a [vocab, dim] table picked by int ids of any shape (lookup_table_v2: no
    trailing 1 on the ids); output shape ids.shape + [dim].

    >>> # emb = embedding(ids [N, T], size=[1000, 16])     # -> [N, T, 16]
    """
    return embedding_op("lookup_table_v2", input, size, is_sparse, is_distributed, padding_idx,
                        param_attr, dtype)
