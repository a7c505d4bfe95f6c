"""fluid.layers normalization builders: batch_norm and layer_norm.

>>> # y = batch_norm(input=conv, act="relu")
"""
from __future__ import annotations

import math
import numbers

from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .initializer import ConstantInitializer
from .param_attr import ParamAttr

__all__ = ["batch_norm", "layer_norm"]

_FLOATS = {"float16", "float32", "float64"}


def _check_float(value, arg: str, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not low <= value <= high:
        raise InvalidArgumentError(f"{where}: {arg} must be in [{low}, {high}], got {value!r}")
    return float(value)


def batch_norm(input, act=None, is_test=False, momentum=0.9, epsilon=1e-05, param_attr=None,
               bias_attr=None, data_layout="NCHW", in_place=False, name=None,
               moving_mean_name=None, moving_variance_name=None,
               do_model_average_for_mean_and_var=True, use_global_stats=False):
    """Batch normalization over every dim but the channel (dim 1 for NCHW and for [N, C]
    inputs, the last dim for NHWC).

    Creates scale `batch_norm_<n>.w_0` (ones), bias `.b_0` (zeros), and the non-trainable
    moving mean `.w_1` (zeros) and variance `.w_2` (ones), which training updates in place:
    moving = momentum * moving + (1 - momentum) * batch statistic.

    >>> # y = batch_norm(x [N, 16, 8, 8])      # four parameters of shape [16]
    """
    where = "batch_norm"
    check_variable(input, "input", where, dtypes=_FLOATS)
    if data_layout not in ("NCHW", "NHWC"):
        raise InvalidArgumentError(
            f"{where}: data_layout must be 'NCHW' or 'NHWC', got {data_layout!r}")
    if input.ndim < 2:
        raise InvalidArgumentError(
            f"{where}: input must have at least 2 dims, got {input.name} {list(input.shape)}")
    channels = input.shape[1] if data_layout == "NCHW" else input.shape[-1]
    if channels <= 0:
        raise InvalidArgumentError(
            f"{where}: the channel dim of {input.name} {list(input.shape)} must be known")
    momentum = _check_float(momentum, "momentum", where, 0.0, 1.0)
    epsilon = _check_float(epsilon, "epsilon", where, 0.0, math.inf)
    helper = LayerHelper("batch_norm", param_attr=param_attr, bias_attr=bias_attr, act=act,
                         name=name)
    # fluid keeps half-precision inputs' statistics in float32
    dtype = "float32" if input.dtype == "float16" else input.dtype
    shape = [channels]
    scale = helper.create_parameter(helper.param_attr, shape, dtype,
                                    default_initializer=ConstantInitializer(1.0))
    bias_attr = helper.bias_attr
    if bias_attr is False:
        raise InvalidArgumentError(f"{where}: bias_attr=False is not supported; batch_norm "
                                   f"always has a bias (give a ParamAttr or None)")
    bias = helper.create_parameter(bias_attr, shape, dtype, is_bias=True)
    mean = helper.create_parameter(
        ParamAttr(name=moving_mean_name, initializer=ConstantInitializer(0.0), trainable=False,
                  do_model_average=do_model_average_for_mean_and_var), shape, dtype)
    variance = helper.create_parameter(
        ParamAttr(name=moving_variance_name, initializer=ConstantInitializer(1.0),
                  trainable=False, do_model_average=do_model_average_for_mean_and_var),
        shape, dtype)
    saved_mean = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    saved_variance = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    out = input if in_place else helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("batch_norm",
                     {"X": [input], "Scale": [scale], "Bias": [bias], "Mean": [mean],
                      "Variance": [variance]},
                     {"Y": [out], "MeanOut": [mean], "VarianceOut": [variance],
                      "SavedMean": [saved_mean], "SavedVariance": [saved_variance]},
                     {"momentum": momentum, "epsilon": epsilon, "is_test": bool(is_test),
                      "data_layout": data_layout, "use_global_stats": bool(use_global_stats)},
                     compat_attrs={"use_mkldnn": False, "fuse_with_relu": False})
    return helper.append_activation(out)


def layer_norm(input, scale=True, shift=True, begin_norm_axis=1, epsilon=1e-05,
               param_attr=None, bias_attr=None, act=None, name=None):
    """Normalize over dims begin_norm_axis.. of each sample, then scale (ones) and shift
    (zeros), both of shape [prod(input.shape[begin_norm_axis:])].

    >>> # y = layer_norm(x [N, 10, 32], begin_norm_axis=2)   # scale, bias of shape [32]
    """
    where = "layer_norm"
    check_variable(input, "input", where, dtypes=_FLOATS)
    if isinstance(begin_norm_axis, bool) or not isinstance(begin_norm_axis, int) or not (
            0 < begin_norm_axis < input.ndim):
        raise InvalidArgumentError(
            f"{where}: begin_norm_axis={begin_norm_axis!r} must be in [1, {input.ndim - 1}] "
            f"for {input.name} {list(input.shape)}")
    norm_dims = input.shape[begin_norm_axis:]
    if any(d < 0 for d in norm_dims):
        raise InvalidArgumentError(
            f"{where}: the normalized dims {list(norm_dims)} of {input.name} must be known")
    epsilon = _check_float(epsilon, "epsilon", where, 0.0, math.inf)
    helper = LayerHelper("layer_norm", param_attr=param_attr, bias_attr=bias_attr, act=act,
                         name=name)
    dtype = input.dtype
    shape = [math.prod(norm_dims)]
    inputs = {"X": [input]}
    if scale:
        inputs["Scale"] = [helper.create_parameter(
            helper.param_attr, shape, dtype, default_initializer=ConstantInitializer(1.0))]
    if shift and helper.bias_attr is not False:
        inputs["Bias"] = [helper.create_parameter(helper.bias_attr, shape, dtype, is_bias=True)]
    mean = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    variance = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("layer_norm", inputs, {"Y": [out], "Mean": [mean], "Variance": [variance]},
                     {"epsilon": epsilon, "begin_norm_axis": begin_norm_axis})
    return helper.append_activation(out)
