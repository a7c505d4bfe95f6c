"""fluid.input: one_hot (fluid 1.8's one_hot_v2: any id shape) and embedding, also reachable as
fluid.one_hot and fluid.embedding.

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program()):
...     ids = fluid.data("ids", [None, 5], "int64")
...     fluid.one_hot(ids, depth=10).shape
(-1, 5, 10)
"""
from __future__ import annotations

from ..layers import tensor as _tensor
from ..layers.helper import check_variable
from ..layers.static_nn import embedding

__all__ = ["embedding", "one_hot"]


def one_hot(input, depth, allow_out_of_range=False):
    """int ids of any shape -> float32 one-hot vectors of shape input.shape + [depth], unlike
    fluid.layers.one_hot, whose ids end in a dim of 1. An id outside [0, depth) is an error
    unless allow_out_of_range, which makes its row all zeros."""
    check_variable(input, "input", "one_hot", dtypes={"int32", "int64"})
    return _tensor.one_hot(_tensor.unsqueeze(input, [input.ndim]), depth, allow_out_of_range)
