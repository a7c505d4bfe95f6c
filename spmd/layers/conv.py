"""fluid.layers conv2d and pool2d builders (NCHW).

>>> # y = conv2d(input=img, num_filters=8, filter_size=3, padding=1, act="relu")
>>> # y = pool2d(input=y, pool_size=2, pool_type="max", pool_stride=2)
"""
from __future__ import annotations

import math
import numbers

from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .initializer import NormalInitializer

__all__ = ["conv2d", "pool2d"]

_FLOATS = {"float16", "float32", "float64"}


def _pair(value, arg: str, where: str, minimum: int) -> list[int]:
    """An int or a list of two ints, as fluid's convert_to_list(value, 2)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(values) != 2 or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= minimum
            for v in values):
        raise InvalidArgumentError(
            f"{where}: {arg} must be an int or two ints >= {minimum}, got {value!r}")
    return [int(v) for v in values]


def _padding(padding, data_format: str, where: str) -> tuple[list[int], str]:
    """fluid's padding forms -> (paddings, padding_algorithm): "SAME"/"VALID"; p; [ph, pw];
    [top, bottom, left, right]; or one pair per dim of the data format."""
    if isinstance(padding, str):
        algo = padding.upper()
        if algo not in ("SAME", "VALID"):
            raise InvalidArgumentError(
                f"{where}: padding must be 'SAME', 'VALID' or ints, got {padding!r}")
        return [0, 0], algo
    if isinstance(padding, (list, tuple)) and len(padding) == 4 and all(
            isinstance(p, (list, tuple)) for p in padding):
        spatial = padding[2:] if data_format == "NCHW" else padding[1:3]
        batch_channel = [padding[0], padding[1]] if data_format == "NCHW" else [padding[0],
                                                                                 padding[3]]
        if any(list(p) != [0, 0] for p in batch_channel):
            raise InvalidArgumentError(
                f"{where}: padding of the batch and channel dims must be [0, 0], got {padding}")
        padding = [int(v) for pair in spatial for v in pair]
    values = list(padding) if isinstance(padding, (list, tuple)) else [padding, padding]
    if len(values) not in (2, 4) or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0
            for v in values):
        raise InvalidArgumentError(
            f"{where}: padding must be an int >= 0, 2 or 4 ints, or 'SAME'/'VALID'; "
            f"got {padding!r}")
    return [int(v) for v in values], "EXPLICIT"


def _check_format(input, data_format: str, where: str):
    check_variable(input, "input", where, dtypes=_FLOATS)
    if data_format not in ("NCHW", "NHWC"):
        raise InvalidArgumentError(
            f"{where}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    if input.ndim != 4:
        raise InvalidArgumentError(
            f"{where}: input must be 4-D ({data_format}), got {input.name} of shape "
            f"{list(input.shape)}")


def conv2d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=None,
           param_attr=None, bias_attr=None, use_cudnn=True, act=None, name=None,
           data_format="NCHW"):
    """2-D convolution of NCHW input with a [num_filters, C/groups, kh, kw] filter, plus a
    [num_filters] bias (bias_attr=False: none) and `act`.

    The filter defaults to Normal(0, sqrt(2 / (kh*kw*C))) as fluid 1.8; parameters are
    `conv2d_<n>.w_0` and `conv2d_<n>.b_0`.

    >>> # conv2d(x [N, 3, 32, 32], num_filters=16, filter_size=3, padding=1) -> [N, 16, 32, 32]
    """
    where = "conv2d"
    _check_format(input, data_format, where)
    channels = input.shape[1] if data_format == "NCHW" else input.shape[3]
    if channels <= 0:
        raise InvalidArgumentError(
            f"{where}: the channel dim of {input.name} {list(input.shape)} must be known")
    if isinstance(num_filters, bool) or not isinstance(num_filters, numbers.Integral) or (
            num_filters <= 0):
        raise InvalidArgumentError(f"{where}: num_filters must be a positive int, got "
                                   f"{num_filters!r}")
    groups = 1 if groups is None else groups
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups <= 0 or (
            channels % groups or num_filters % groups):
        raise InvalidArgumentError(
            f"{where}: groups={groups} must be a positive int dividing the input channels "
            f"({channels}) and num_filters ({num_filters})")
    filter_size = _pair(filter_size, "filter_size", where, 1)
    strides = _pair(stride, "stride", where, 1)
    dilations = _pair(dilation, "dilation", where, 1)
    paddings, algorithm = _padding(padding, data_format, where)

    op_type = "conv2d"
    if channels == groups and num_filters % channels == 0 and not use_cudnn:
        op_type = "depthwise_conv2d"  # fluid 1.8 picks the depthwise kernel this way
    helper = LayerHelper(op_type, param_attr=param_attr, bias_attr=bias_attr, act=act,
                         name=name)
    std = math.sqrt(2.0 / (filter_size[0] * filter_size[1] * channels))
    w = helper.create_parameter(helper.param_attr,
                                [int(num_filters), channels // groups] + filter_size,
                                input.dtype, default_initializer=NormalInitializer(0.0, std))
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(op_type, {"Input": [input], "Filter": [w]}, {"Output": [out]},
                     {"strides": strides, "paddings": paddings, "dilations": dilations,
                      "groups": int(groups), "padding_algorithm": algorithm,
                      "data_format": data_format},
                     compat_attrs={"use_cudnn": bool(use_cudnn), "use_mkldnn": False,
                                   "fuse_relu_before_depthwise_conv": False})
    channel_dim = 1 if data_format == "NCHW" else 3
    pre_act = helper.append_bias_op(out, dim_start=channel_dim, dim_end=channel_dim + 1)
    return helper.append_activation(pre_act)


def pool2d(input, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0,
           global_pooling=False, use_cudnn=True, ceil_mode=False, name=None, exclusive=True,
           data_format="NCHW"):
    """Max or average pooling over NCHW windows. `exclusive` (avg) divides by the number of
    non-padding elements; `global_pooling` pools each whole feature map (pool_size ignored).

    >>> # pool2d(x [N, 8, 16, 16], pool_size=2, pool_stride=2) -> [N, 8, 8, 8]
    """
    where = "pool2d"
    _check_format(input, data_format, where)
    if pool_type not in ("max", "avg"):
        raise InvalidArgumentError(
            f"{where}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if not global_pooling and pool_size == -1:
        raise InvalidArgumentError(
            f"{where}: give pool_size (an int or two ints) when global_pooling is False")
    ksize = [1, 1] if global_pooling and pool_size == -1 else _pair(pool_size, "pool_size",
                                                                     where, 1)
    strides = _pair(pool_stride, "pool_stride", where, 1)
    paddings, algorithm = _padding(pool_padding, data_format, where)
    helper = LayerHelper("pool2d", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("pool2d", {"X": [input]}, {"Out": [out]},
                     {"pooling_type": pool_type, "ksize": ksize,
                      "global_pooling": bool(global_pooling), "strides": strides,
                      "paddings": paddings, "padding_algorithm": algorithm,
                      "ceil_mode": bool(ceil_mode), "exclusive": bool(exclusive),
                      "data_format": data_format},
                     compat_attrs={"use_cudnn": bool(use_cudnn), "use_mkldnn": False,
                                   "adaptive": False})
    return out
