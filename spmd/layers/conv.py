"""fluid.layers convolution builders: conv2d, conv3d, conv2d_transpose, conv3d_transpose,
deformable_conv; the pooling builders live in pool.py and are re-exported here.

Channel-last inputs (NHWC, NDHWC) are transposed to channel-first around the op (the kernels
work channel-first), so every data_format fluid accepts gives fluid's numbers.

>>> # y = conv2d(input=img, num_filters=8, filter_size=3, padding=1, act="relu")
>>> # y = pool2d(input=y, pool_size=2, pool_type="max", pool_stride=2)
"""
from __future__ import annotations

import math

from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .initializer import NormalInitializer
from .layout import (
    FORMATS,
    channel_back,
    channel_first,
    check_format,
    is_int,
    nd_ints,
    resolve_padding,
)
from .pool import adaptive_pool2d, adaptive_pool3d, pool2d, pool3d  # re-exported (__all__)

__all__ = ["adaptive_pool2d", "adaptive_pool3d", "conv2d", "conv2d_transpose", "conv3d",
           "conv3d_transpose", "deformable_conv", "pool2d", "pool3d"]


def _channels(input, data_format: str, where: str) -> int:
    c = input.shape[-1] if data_format.endswith("C") else input.shape[1]
    if c <= 0:
        raise InvalidArgumentError(
            f"{where}: the channel dim of {input.name} {list(input.shape)} must be known")
    return c


def _groups(groups, channels: int, num_filters: int, where: str) -> int:
    groups = 1 if groups is None else groups
    if not is_int(num_filters) or num_filters <= 0:
        raise InvalidArgumentError(f"{where}: num_filters must be a positive int, got "
                                   f"{num_filters!r}")
    if not is_int(groups) or groups <= 0 or channels % groups or num_filters % groups:
        raise InvalidArgumentError(
            f"{where}: groups={groups} must be a positive int dividing the input channels "
            f"({channels}) and num_filters ({num_filters})")
    return int(groups)


def _finish(helper, pre, data_format: str, nd: int):
    """Bias on the channel dim of the caller's layout, then the activation."""
    out = channel_back(helper, pre, data_format)
    dim = nd + 1 if data_format.endswith("C") else 1
    return helper.append_activation(helper.append_bias_op(out, dim_start=dim, dim_end=dim + 1))


def _conv_nd(nd, input, num_filters, filter_size, stride, padding, dilation, groups,
             param_attr, bias_attr, use_cudnn, act, name, data_format):
    where = f"conv{nd}d"
    check_format(input, data_format, where, nd)
    if not isinstance(use_cudnn, bool):
        raise InvalidArgumentError(f"{where}: use_cudnn must be True or False, got "
                                   f"{use_cudnn!r}")
    channels = _channels(input, data_format, where)
    groups = _groups(groups, channels, num_filters, where)
    filter_size = nd_ints(filter_size, "filter_size", where, 1, nd)
    paddings, algorithm = resolve_padding(padding, data_format, where, nd)
    op_type = where
    if nd == 2 and channels == groups and num_filters % channels == 0 and not use_cudnn:
        op_type = "depthwise_conv2d"  # fluid 1.8 picks the depthwise kernel this way
    helper = LayerHelper(op_type, param_attr=param_attr, bias_attr=bias_attr, act=act,
                         name=name)
    std = math.sqrt(2.0 / (math.prod(filter_size) * channels))
    w = helper.create_parameter(helper.param_attr,
                                [int(num_filters), channels // groups] + filter_size,
                                input.dtype, default_initializer=NormalInitializer(0.0, std))
    x = channel_first(helper, input, data_format)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(op_type, {"Input": [x], "Filter": [w]}, {"Output": [out]},
                     {"strides": nd_ints(stride, "stride", where, 1, nd), "paddings": paddings,
                      "dilations": nd_ints(dilation, "dilation", where, 1, nd), "groups": groups,
                      "padding_algorithm": algorithm, "data_format": FORMATS[nd][0]},
                     compat_attrs={"use_cudnn": bool(use_cudnn), "use_mkldnn": False,
                                   "fuse_relu_before_depthwise_conv": False})
    return _finish(helper, out, data_format, nd)


def conv2d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=None,
           param_attr=None, bias_attr=None, use_cudnn=True, act=None, name=None,
           data_format="NCHW"):
    """2-D convolution with a [num_filters, C/groups, kh, kw] filter, plus a [num_filters] bias
    (bias_attr=False: none) and `act`. padding: an int, [ph, pw], [top, bottom, left, right],
    one pair per dim of data_format, or "SAME"/"VALID".

    The filter defaults to Normal(0, sqrt(2 / (kh*kw*C))) as fluid 1.8; parameters are
    `conv2d_<n>.w_0` and `conv2d_<n>.b_0`.

    >>> # conv2d(x [N, 3, 32, 32], num_filters=16, filter_size=3, padding=1) -> [N, 16, 32, 32]
    """
    return _conv_nd(2, input, num_filters, filter_size, stride, padding, dilation, groups,
                    param_attr, bias_attr, use_cudnn, act, name, data_format)


def conv3d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=None,
           param_attr=None, bias_attr=None, use_cudnn=True, act=None, name=None,
           data_format="NCDHW"):
    """3-D convolution with a [num_filters, C/groups, kd, kh, kw] filter (Normal(0,
    sqrt(2 / (kd*kh*kw*C))) by default), a [num_filters] bias and `act`.

    >>> # conv3d(x [N, 3, 8, 16, 16], num_filters=4, filter_size=3) -> [N, 4, 6, 14, 14]
    """
    return _conv_nd(3, input, num_filters, filter_size, stride, padding, dilation, groups,
                    param_attr, bias_attr, use_cudnn, act, name, data_format)


def _transpose_filter_size(filter_size, output_size, input, data_format, stride, dilation,
                           paddings, nd, where):
    if filter_size is not None:
        return nd_ints(filter_size, "filter_size", where, 1, nd)
    if output_size is None:
        raise InvalidArgumentError(f"{where}: give filter_size, or output_size to derive it")
    output_size = nd_ints(output_size, "output_size", where, 1, nd)
    sp = input.shape[1:nd + 1] if data_format.endswith("C") else input.shape[2:]
    pads = paddings if len(paddings) == 2 * nd else [p for p in paddings for _ in range(2)]
    # fluid's rule: the filter that makes the natural output size equal output_size
    return [(output_size[i] - (sp[i] - 1) * stride[i] + pads[2 * i] + pads[2 * i + 1] - 1)
            // dilation[i] + 1 for i in range(nd)]


def _conv_transpose_nd(nd, input, num_filters, output_size, filter_size, padding, stride,
                       dilation, groups, param_attr, bias_attr, use_cudnn, act, name,
                       data_format):
    where = f"conv{nd}d_transpose"
    check_format(input, data_format, where, nd)
    channels = _channels(input, data_format, where)
    groups = _groups(groups, channels, num_filters, where)
    stride = nd_ints(stride, "stride", where, 1, nd)
    dilation = nd_ints(dilation, "dilation", where, 1, nd)
    paddings, algorithm = resolve_padding(padding, data_format, where, nd)
    filter_size = _transpose_filter_size(filter_size, output_size, input, data_format, stride,
                                         dilation, paddings, nd, where)
    output_size = [] if output_size is None else nd_ints(output_size, "output_size", where, 1, nd)
    op_type = where
    if nd == 2 and channels == groups and num_filters == channels and not use_cudnn:
        op_type = "depthwise_conv2d_transpose"
    helper = LayerHelper(op_type, param_attr=param_attr, bias_attr=bias_attr, act=act,
                         name=name)
    w = helper.create_parameter(helper.param_attr,
                                [channels, int(num_filters) // groups] + filter_size,
                                input.dtype)
    x = channel_first(helper, input, data_format)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(op_type, {"Input": [x], "Filter": [w]}, {"Output": [out]},
                     {"strides": stride, "paddings": paddings, "dilations": dilation,
                      "groups": groups, "padding_algorithm": algorithm,
                      "output_size": output_size, "data_format": FORMATS[nd][0]},
                     compat_attrs={"use_cudnn": bool(use_cudnn)})
    return _finish(helper, out, data_format, nd)


def conv2d_transpose(input, num_filters, output_size=None, filter_size=None, padding=0,
                     stride=1, dilation=1, groups=None, param_attr=None, bias_attr=None,
                     use_cudnn=True, act=None, name=None, data_format="NCHW"):
    """Transposed 2-D convolution (the adjoint of conv2d) with a [C, num_filters/groups, kh, kw]
    filter (Xavier by default), a [num_filters] bias and `act`. Without filter_size, it is
    derived from output_size; output_size may exceed the natural size by less than the stride.

    >>> # conv2d_transpose(x [N, 3, 8, 8], num_filters=2, filter_size=3, stride=2)
    >>> #   -> [N, 2, 17, 17]
    """
    return _conv_transpose_nd(2, input, num_filters, output_size, filter_size, padding, stride,
                              dilation, groups, param_attr, bias_attr, use_cudnn, act, name,
                              data_format)


def conv3d_transpose(input, num_filters, output_size=None, filter_size=None, padding=0,
                     stride=1, dilation=1, groups=None, param_attr=None, bias_attr=None,
                     use_cudnn=True, act=None, name=None, data_format="NCDHW"):
    """Transposed 3-D convolution with a [C, num_filters/groups, kd, kh, kw] filter.

    >>> # conv3d_transpose(x [N, 3, 4, 8, 8], num_filters=2, filter_size=3) -> [N, 2, 6, 10, 10]
    """
    return _conv_transpose_nd(3, input, num_filters, output_size, filter_size, padding, stride,
                              dilation, groups, param_attr, bias_attr, use_cudnn, act, name,
                              data_format)


def deformable_conv(input, offset, mask, num_filters, filter_size, stride=1, padding=0,
                    dilation=1, groups=None, deformable_groups=None, im2col_step=None,
                    param_attr=None, bias_attr=None, modulated=True, name=None):
    """Deformable convolution on NCHW input: each kernel tap reads the input bilinearly at its
    position shifted by `offset` [N, 2*dg*kh*kw, OH, OW]; modulated=True (DCN v2) also scales
    each read by `mask` [N, dg*kh*kw, OH, OW] (modulated=False: DCN v1, mask unused). The
    filter defaults to Normal(0, sqrt(2 / (kh*kw*C))), plus a [num_filters] bias.

    >>> # deformable_conv(x [N, 3, 8, 8], offset [N, 18, 8, 8], mask [N, 9, 8, 8],
    >>> #                 num_filters=4, filter_size=3, padding=1) -> [N, 4, 8, 8]
    """
    where = "deformable_conv"
    check_variable(input, "input", where, dtypes={"float32", "float64"})
    check_variable(offset, "offset", where, dtypes={"float32", "float64"})
    if modulated:
        check_variable(mask, "mask", where, dtypes={"float32", "float64"})
    if input.ndim != 4:
        raise InvalidArgumentError(f"{where}: input must be 4-D NCHW, got {list(input.shape)}")
    channels = _channels(input, "NCHW", where)
    groups_value = _groups(groups, channels, num_filters, where)
    filter_size = nd_ints(filter_size, "filter_size", where, 1)
    helper = LayerHelper(where, param_attr=param_attr, bias_attr=bias_attr, name=name)
    std = math.sqrt(2.0 / (math.prod(filter_size) * channels))
    w = helper.create_parameter(helper.param_attr,
                                [int(num_filters), channels // groups_value] + filter_size,
                                input.dtype, default_initializer=NormalInitializer(0.0, std))
    inputs = {"Input": [input], "Filter": [w], "Offset": [offset]}
    if modulated:
        inputs["Mask"] = [mask]
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("deformable_conv" if modulated else "deformable_conv_v1", inputs,
                     {"Output": [out]},
                     {"strides": nd_ints(stride, "stride", where, 1),
                      "paddings": nd_ints(padding, "padding", where, 0),
                      "dilations": nd_ints(dilation, "dilation", where, 1),
                      "groups": groups_value, "deformable_groups": deformable_groups or 1,
                      "im2col_step": im2col_step or 64})
    return helper.append_bias_op(out, dim_start=1, dim_end=2)
