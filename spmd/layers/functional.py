"""paddle.nn.functional (2.x names) as thin wrappers over the fluid builders, for static
programs.

>>> # loss = cross_entropy(logits, label)      # softmax + cross entropy + mean, as paddle 2.x
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from . import conv as _conv
from . import layout
from . import loss as _loss
from . import math_ops as _m
from . import nn as _nn
from . import tensor as _t
from .helper import LayerHelper, check_variable

__all__ = [
    "avg_pool2d", "conv2d", "cross_entropy", "dropout", "embedding", "gelu", "leaky_relu",
    "linear", "max_pool2d", "mse_loss", "one_hot", "relu", "sigmoid", "softmax",
    "softmax_with_cross_entropy", "square_error_cost", "tanh",
]

relu = _m.relu
sigmoid = _m.sigmoid
tanh = _m.tanh
softmax_with_cross_entropy = _loss.softmax_with_cross_entropy
square_error_cost = _loss.square_error_cost


def gelu(x, approximate=False, name=None):
    return _m.gelu(x, approximate=approximate, name=name)


def leaky_relu(x, negative_slope=0.01, name=None):
    """x if x > 0 else negative_slope * x (paddle 2.x default slope 0.01)."""
    return _m.leaky_relu(x, alpha=negative_slope, name=name)


def softmax(x, axis=-1, dtype=None, name=None):
    if dtype is not None:
        x = _t.cast(x, dtype)
    return _nn.softmax(x, axis=axis, name=name)


def dropout(x, p=0.5, axis=None, training=True, mode="upscale_in_train", name=None):
    """paddle 2.x dropout: `mode` upscale_in_train (default) or downscale_in_infer."""
    if axis is not None:
        raise InvalidArgumentError("dropout: axis (dropping whole slices) is not supported")
    modes = {"upscale_in_train": "upscale_in_train", "downscale_in_infer": "downgrade_in_infer"}
    if mode not in modes:
        raise InvalidArgumentError(
            f"dropout: mode must be one of {sorted(modes)}, got {mode!r}")
    return _nn.dropout(x, p, is_test=not training, name=name,
                       dropout_implementation=modes[mode])


def _reduce_loss(loss, reduction: str, where: str):
    if reduction == "mean":
        return _m.mean(loss)
    if reduction == "sum":
        return _m.reduce_sum(loss)
    if reduction == "none":
        return loss
    raise InvalidArgumentError(
        f"{where}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def cross_entropy(input, label, weight=None, ignore_index=-100, reduction="mean",
                  soft_label=False, axis=-1, use_softmax=True, name=None):
    """paddle 2.x cross_entropy: `input` are logits (softmax applied here unless
    use_softmax=False); hard labels may omit the trailing 1. reduction 'mean' with hard labels
    and an ignore_index of its own (not -100) averages over the samples not ignored, as paddle
    2.x does; otherwise over all samples."""
    if weight is not None:
        raise InvalidArgumentError("cross_entropy: per-class weight is not supported")
    check_variable(input, "input", "cross_entropy")
    check_variable(label, "label", "cross_entropy")
    if not soft_label and label.ndim == input.ndim - 1:
        label = _t.unsqueeze(label, [axis % input.ndim])
    if use_softmax:
        loss = _loss.softmax_with_cross_entropy(input, label, soft_label=soft_label,
                                                ignore_index=ignore_index, axis=axis)
    else:
        if axis not in (-1, input.ndim - 1):
            raise InvalidArgumentError("cross_entropy: use_softmax=False needs axis=-1")
        loss = _loss.cross_entropy(input, label, soft_label=soft_label,
                                   ignore_index=ignore_index)
    if reduction == "mean" and not soft_label and ignore_index != -100:
        return _mean_over_kept(loss, label, ignore_index)
    return _reduce_loss(loss, reduction, "cross_entropy")


def _mean_over_kept(loss, label, ignore_index: int):
    """sum(loss) / max(1, number of labels != ignore_index): ignored samples have zero loss
    and do not count."""
    helper = LayerHelper("cross_entropy_mean")
    offset = _m.scale(_t.cast(label, loss.dtype), bias=-float(ignore_index))  # 0: ignored
    sign = helper.create_variable_for_type_inference(loss.dtype)
    helper.append_op("sign", {"X": [offset]}, {"Out": [sign]}, {})
    kept = _m.square(sign)  # 1 for a kept label, 0 for an ignored one
    count = _m.elementwise_max(_m.reduce_sum(kept), _t.fill_constant([1], loss.dtype, 1.0))
    for var in (offset, sign, kept, count):  # depends on the labels only
        var.stop_gradient = True
    return _m.elementwise_div(_m.reduce_sum(loss), count)


def mse_loss(input, label, reduction="mean", name=None):
    """mean (or sum, or none) of (input - label) ** 2."""
    return _reduce_loss(_loss.square_error_cost(input, label), reduction, "mse_loss")


def one_hot(x, num_classes, name=None):
    """int ids of any shape -> float32 one-hot of shape x.shape + [num_classes]."""
    check_variable(x, "x", "one_hot", dtypes={"int32", "int64"})
    return _t.one_hot(_t.unsqueeze(x, [x.ndim]), num_classes)


def embedding(x, weight, padding_idx=None, sparse=False, name=None):
    """Rows of the [vocab, dim] Variable `weight` picked by int ids `x` (lookup_table_v2)."""
    helper = LayerHelper("embedding", name=name)
    check_variable(x, "x", "embedding", dtypes={"int32", "int64"})
    check_variable(weight, "weight", "embedding")
    if weight.ndim != 2:
        raise InvalidArgumentError(
            f"embedding: weight must be 2-D [vocab, dim], got {list(weight.shape)}")
    vocab = weight.shape[0]
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        padding_idx += vocab
    out = helper.create_variable_for_type_inference(weight.dtype)
    helper.append_op("lookup_table_v2", {"W": [weight], "Ids": [x]}, {"Out": [out]},
                     {"padding_idx": int(padding_idx)},
                     compat_attrs={"is_sparse": bool(sparse)})
    return out


def linear(x, weight, bias=None, name=None):
    """x @ weight (+ bias), weight of shape [in, out]."""
    out = _m.matmul(x, weight, name=name)
    if bias is not None:
        out = _m.elementwise_add(out, bias, axis=-1)
    return out


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
           data_format="NCHW", name=None):
    """Convolution of NCHW `x` with the given filter Variable [M, C/groups, kh, kw]."""
    where = "conv2d"
    layout.check_format(x, data_format, where)
    check_variable(weight, "weight", where)
    paddings, algorithm = layout.resolve_padding(padding, data_format, where)
    helper = LayerHelper("conv2d", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("conv2d", {"Input": [x], "Filter": [weight]}, {"Output": [out]},
                     {"strides": layout.nd_ints(stride, "stride", where, 1),
                      "paddings": paddings,
                      "dilations": layout.nd_ints(dilation, "dilation", where, 1),
                      "groups": int(groups), "padding_algorithm": algorithm,
                      "data_format": data_format})
    if bias is not None:
        out = _m.elementwise_add(out, bias, axis=1 if data_format == "NCHW" else 3)
    return out


def _pool(pool_type, x, kernel_size, stride, padding, ceil_mode, exclusive, data_format,
          name):
    if stride is None:
        stride = kernel_size
    if isinstance(kernel_size, numbers.Integral) or isinstance(kernel_size, (list, tuple)):
        return _conv.pool2d(x, pool_size=kernel_size, pool_type=pool_type, pool_stride=stride,
                            pool_padding=padding, ceil_mode=ceil_mode, exclusive=exclusive,
                            data_format=data_format, name=name)
    raise InvalidArgumentError(f"{pool_type}_pool2d: kernel_size must be an int or two ints, "
                               f"got {kernel_size!r}")


def max_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, return_mask=False,
               data_format="NCHW", name=None):
    """Max pooling; stride defaults to kernel_size."""
    if return_mask:
        raise InvalidArgumentError("max_pool2d: return_mask=True is not supported")
    return _pool("max", x, kernel_size, stride, padding, ceil_mode, True, data_format, name)


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True,
               divisor_override=None, data_format="NCHW", name=None):
    """Average pooling; stride defaults to kernel_size."""
    if divisor_override is not None:
        raise InvalidArgumentError("avg_pool2d: divisor_override is not supported")
    return _pool("avg", x, kernel_size, stride, padding, ceil_mode, exclusive, data_format,
                 name)
