"""The fluid.dygraph.nn layers that spmd builds, as fluid 1.8 builds them in a static program
(dygraph mode off): parameters at construction (or, for RowConv and SequenceConv, at the first
call, from the input's width), the same ops and attributes as fluid's `forward`.

- Embedding: lookup_table_v2 on an int64 input;
- LayerNorm(normalized_shape): layer_norm over the trailing dims, scale 1 / shift 0;
- RowConv(name_scope, future_context_size): row_conv on a LoD input (fluid 1.8 has it in
  static mode only);
- SequenceConv(name_scope, num_filters, filter_size=3, ...): sequence_conv, then the bias and
  the activation (static mode only in fluid 1.8 too).

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     norm = fluid.dygraph.LayerNorm([4])
...     y = norm(fluid.data("x", [None, 4], "float32"))
>>> y.shape
(-1, 4)
"""
from __future__ import annotations

import numbers

import numpy as np

from ...errors import InvalidArgumentError
from ...layers.helper import LayerHelper, check_variable
from ...layers.initializer import ConstantInitializer
from .layers import Layer

__all__ = ["Embedding", "LayerNorm", "RowConv", "SequenceConv"]


def _activate(layer: Layer, x, act):
    return LayerHelper(layer.full_name(), name=layer.full_name(), act=act).append_activation(x)


class Embedding(Layer):
    """fluid.dygraph.Embedding(size, is_sparse=False, is_distributed=False, padding_idx=None,
    param_attr=None, dtype='float32'): the [vocab, dim] table `weight`; calling it looks up
    an int64 ids Variable (lookup_table_v2: the ids' shape plus dim)."""

    def __init__(self, size, is_sparse=False, is_distributed=False, padding_idx=None,
                 param_attr=None, dtype="float32"):
        super().__init__()
        if not isinstance(size, (list, tuple)) or len(size) != 2:
            raise InvalidArgumentError(
                f"Embedding: size must be [vocab_size, embedding_dim], got {size!r}")
        self._size = [int(d) for d in size]
        self._is_sparse, self._is_distributed = bool(is_sparse), bool(is_distributed)
        self._padding_idx = (-1 if padding_idx is None else padding_idx if padding_idx >= 0
                             else self._size[0] + padding_idx)
        self._remote_prefetch = self._is_sparse and not self._is_distributed
        self._dtype = dtype
        self.weight = self.create_parameter(attr=param_attr, shape=self._size, dtype=dtype)

    def forward(self, input):
        check_variable(input, "input", "Embedding", {"int64"})
        out = self._helper.create_variable_for_type_inference(self._dtype)
        self._helper.append_op(
            "lookup_table_v2", inputs={"Ids": [input], "W": [self.weight]},
            outputs={"Out": [out]},
            attrs={"is_sparse": self._is_sparse, "is_distributed": self._is_distributed,
                   "remote_prefetch": self._remote_prefetch,
                   "padding_idx": self._padding_idx})
        return out


class LayerNorm(Layer):
    """fluid.dygraph.LayerNorm(normalized_shape, scale=True, shift=True, epsilon=1e-05,
    param_attr=None, bias_attr=None, act=None, dtype='float32'): layer_norm over the input's
    trailing dims, which must equal normalized_shape (a ValueError otherwise, as fluid)."""

    def __init__(self, normalized_shape, scale=True, shift=True, epsilon=1e-05, param_attr=None,
                 bias_attr=None, act=None, dtype="float32"):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = [normalized_shape]
        self._normalized_shape = [int(d) for d in normalized_shape]
        self._scale, self._shift = bool(scale), bool(shift)
        self._epsilon, self._act, self._dtype = float(epsilon), act, dtype
        param_shape = [int(np.prod(self._normalized_shape))]
        self.weight = (self.create_parameter(attr=param_attr, shape=param_shape, dtype=dtype,
                                             default_initializer=ConstantInitializer(1.0))
                       if self._scale else None)
        if self._shift and bias_attr is False:
            raise InvalidArgumentError("LayerNorm: shift=True needs a bias; pass shift=False "
                                       "instead of bias_attr=False")
        self.bias = (self.create_parameter(attr=bias_attr, shape=param_shape, dtype=dtype,
                                           is_bias=True) if self._shift else None)

    def forward(self, input):
        check_variable(input, "input", "LayerNorm", {"float32", "float64"})
        shape, n = list(input.shape), len(self._normalized_shape)
        begin = len(shape) - n
        if begin < 0 or shape[begin:] != self._normalized_shape:
            raise ValueError(
                f"Given normalized_shape is {self._normalized_shape}, expected input with shape "
                f"[*, {str(self._normalized_shape)[1:]}, but got input shape {shape}")
        inputs = {"X": [input]}
        if self.weight is not None:
            inputs["Scale"] = [self.weight]
        if self.bias is not None:
            inputs["Bias"] = [self.bias]
        helper = self._helper
        mean = helper.create_variable_for_type_inference(self._dtype, stop_gradient=True)
        variance = helper.create_variable_for_type_inference(self._dtype, stop_gradient=True)
        out = helper.create_variable_for_type_inference(self._dtype)
        helper.append_op("layer_norm", inputs=inputs,
                         outputs={"Y": [out], "Mean": [mean], "Variance": [variance]},
                         attrs={"epsilon": self._epsilon, "begin_norm_axis": begin})
        return _activate(self, out, self._act)


class RowConv(Layer):
    """fluid.dygraph.nn.RowConv(name_scope, future_context_size, param_attr=None, act=None):
    lookahead convolution of a LoD input; its [future_context_size + 1, width] filter is made
    at the first call."""

    def __init__(self, name_scope, future_context_size, param_attr=None, act=None):
        super().__init__(name_scope)
        self._future_context_size = int(future_context_size)
        self._param_attr, self._act = param_attr, act

    def _build_once(self, input):
        check_variable(input, "input", "RowConv", {"float32", "float64"})
        self._dtype = input.dtype
        self.weight = self.create_parameter(
            attr=self._param_attr, shape=[self._future_context_size + 1, input.shape[1]],
            dtype=self._dtype)

    def forward(self, input):
        out = self._helper.create_variable_for_type_inference(self._dtype)
        self._helper.append_op("row_conv", inputs={"X": [input], "Filter": [self.weight]},
                               outputs={"Out": [out]})
        return _activate(self, out, self._act)


class SequenceConv(Layer):
    """fluid.dygraph.nn.SequenceConv(name_scope, num_filters, filter_size=3, filter_stride=1,
    padding=None, bias_attr=None, param_attr=None, act=None): sequence_conv (context centred,
    start -filter_size // 2) plus a bias, then act; the filter is made at the first call."""

    def __init__(self, name_scope, num_filters, filter_size=3, filter_stride=1, padding=None,
                 bias_attr=None, param_attr=None, act=None):
        super().__init__(name_scope)
        self._num_filters, self._filter_size = int(num_filters), int(filter_size)
        self._filter_stride, self._padding = int(filter_stride), padding
        self._bias_attr, self._param_attr, self._act = bias_attr, param_attr, act

    def _build_once(self, input):
        check_variable(input, "input", "SequenceConv", {"float32", "float64"})
        self._dtype = input.dtype
        self.weight = self.create_parameter(
            attr=self._param_attr, shape=[self._filter_size * input.shape[1], self._num_filters],
            dtype=self._dtype)
        self.bias = self.create_parameter(attr=self._bias_attr, shape=[self._num_filters],
                                          dtype=self._dtype, is_bias=True)

    def forward(self, input):
        helper = self._helper
        pre_bias = helper.create_variable_for_type_inference(self._dtype)
        helper.append_op("sequence_conv", inputs={"X": [input], "Filter": [self.weight]},
                         outputs={"Out": [pre_bias]},
                         attrs={"contextStride": self._filter_stride,
                                "contextStart": -int(self._filter_size // 2),
                                "contextLength": self._filter_size})
        out = pre_bias
        if self.bias is not None:
            out = helper.create_variable_for_type_inference(self._dtype)
            helper.append_op("elementwise_add", inputs={"X": [pre_bias], "Y": [self.bias]},
                             outputs={"Out": [out]}, attrs={"axis": 1})
        return _activate(self, out, self._act)
