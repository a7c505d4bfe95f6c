"""fluid.nets: composite networks built from fluid.layers (simple_img_conv_pool,
img_conv_group, sequence_conv_pool, glu, scaled_dot_product_attention).

>>> # import spmd.fluid as fluid
>>> # y = fluid.nets.simple_img_conv_pool(img, num_filters=20, filter_size=5, pool_size=2,
>>> #                                     pool_stride=2, act="relu")
"""
from __future__ import annotations

from ..errors import ArgumentTypeError, InvalidArgumentError
from . import conv, math_ops, nn, norm, sequence, tensor
from .helper import check_variable

__all__ = ["glu", "img_conv_group", "scaled_dot_product_attention", "sequence_conv_pool",
           "simple_img_conv_pool"]


def simple_img_conv_pool(input, num_filters, filter_size, pool_size, pool_stride,
                         pool_padding=0, pool_type="max", global_pooling=False, conv_stride=1,
                         conv_padding=0, conv_dilation=1, conv_groups=1, param_attr=None,
                         bias_attr=None, act=None, use_cudnn=True):
    """conv2d (with act) followed by pool2d.

    >>> # simple_img_conv_pool(img [N, 1, 28, 28], num_filters=20, filter_size=5, pool_size=2,
    >>> #                      pool_stride=2, act="relu") -> [N, 20, 12, 12]
    """
    out = conv.conv2d(input=input, num_filters=num_filters, filter_size=filter_size,
                      stride=conv_stride, padding=conv_padding, dilation=conv_dilation,
                      groups=conv_groups, param_attr=param_attr, bias_attr=bias_attr, act=act,
                      use_cudnn=use_cudnn)
    return conv.pool2d(input=out, pool_size=pool_size, pool_type=pool_type,
                       pool_stride=pool_stride, pool_padding=pool_padding,
                       global_pooling=global_pooling, use_cudnn=use_cudnn)


def _per_conv(value, count: int, arg: str):
    """fluid's rule: a scalar applies to every conv, a list gives one value per conv."""
    if not hasattr(value, "__len__"):
        return [value] * count
    if len(value) != count:
        raise InvalidArgumentError(f"img_conv_group: {arg} has {len(value)} entries for "
                                   f"{count} convolutions")
    return list(value)


def img_conv_group(input, conv_num_filter, pool_size, conv_padding=1, conv_filter_size=3,
                   conv_act=None, param_attr=None, conv_with_batchnorm=False,
                   conv_batchnorm_drop_rate=0.0, pool_stride=1, pool_type="max",
                   use_cudnn=True):
    """A VGG block: one conv2d per entry of conv_num_filter (each optionally followed by
    batch_norm carrying conv_act, then dropout), then one pool2d.

    >>> # img_conv_group(img, conv_num_filter=[64, 64], pool_size=2, pool_stride=2,
    >>> #                conv_act="relu", conv_with_batchnorm=True)
    """
    if not isinstance(conv_num_filter, (list, tuple)):
        raise InvalidArgumentError(f"img_conv_group: conv_num_filter must be a list or tuple, "
                                   f"got {conv_num_filter!r}")
    count = len(conv_num_filter)
    paddings = _per_conv(conv_padding, count, "conv_padding")
    sizes = _per_conv(conv_filter_size, count, "conv_filter_size")
    attrs = _per_conv(param_attr, count, "param_attr")
    with_bn = _per_conv(conv_with_batchnorm, count, "conv_with_batchnorm")
    drops = _per_conv(conv_batchnorm_drop_rate, count, "conv_batchnorm_drop_rate")
    tmp = input
    for i in range(count):
        tmp = conv.conv2d(input=tmp, num_filters=conv_num_filter[i], filter_size=sizes[i],
                          padding=paddings[i], param_attr=attrs[i],
                          act=None if with_bn[i] else conv_act, use_cudnn=use_cudnn)
        if with_bn[i]:
            tmp = norm.batch_norm(input=tmp, act=conv_act)
            if abs(drops[i]) > 1e-5:
                tmp = nn.dropout(x=tmp, dropout_prob=drops[i])
    return conv.pool2d(input=tmp, pool_size=pool_size, pool_type=pool_type,
                       pool_stride=pool_stride, use_cudnn=use_cudnn)


def sequence_conv_pool(input, num_filters, filter_size, param_attr=None, act="sigmoid",
                       pool_type="max", bias_attr=None):
    """sequence_conv (with bias and act) followed by sequence_pool: one row per sequence.

    >>> # words = fluid.data("words", [None, 1], "int64", lod_level=1)
    >>> # emb = fluid.layers.embedding(words, [vocab, 32])
    >>> # sequence_conv_pool(emb, num_filters=64, filter_size=3)  # [num_sequences, 64]
    """
    check_variable(input, "input", "sequence_conv_pool", dtypes={"float32", "float64"})
    conv_out = sequence.sequence_conv(input=input, num_filters=num_filters,
                                      filter_size=filter_size, param_attr=param_attr,
                                      bias_attr=bias_attr, act=act)
    return sequence.sequence_pool(input=conv_out, pool_type=pool_type)


def glu(input, dim=-1):
    """Gated linear unit: split input in two halves a, b along dim; a * sigmoid(b).

    >>> # glu(x [N, 6, 3], dim=1) -> [N, 3, 3]
    """
    check_variable(input, "input", "glu", dtypes={"float16", "float32", "float64"})
    a, b = tensor.split(input, num_or_sections=2, dim=dim)
    return math_ops.elementwise_mul(x=a, y=math_ops.sigmoid(x=b))


def _check_attention(queries, keys, values, num_heads):
    where = "scaled_dot_product_attention"
    args = (("queries", queries), ("keys", keys), ("values", values))
    for arg, v in args:
        check_variable(v, arg, where, dtypes={"float32", "float64"})
    # fluid 1.8 checks the dtypes agree (a TypeError) before the ranks (a ValueError)
    if not queries.dtype == keys.dtype == values.dtype:
        raise ArgumentTypeError(f"{where}: queries, keys and values must share a dtype, got "
                                f"{queries.dtype}, {keys.dtype}, {values.dtype}; cast them "
                                f"to one")
    for arg, v in args:
        if v.ndim != 3:
            raise InvalidArgumentError(f"{where}: {arg} must be 3-D [N, L, D], got "
                                       f"{list(v.shape)}")
    if queries.shape[-1] != keys.shape[-1]:
        raise InvalidArgumentError(f"{where}: queries and keys hidden sizes differ: "
                                   f"{queries.shape[-1]} vs {keys.shape[-1]}")
    if keys.shape[-2] != values.shape[-2]:
        raise InvalidArgumentError(f"{where}: keys and values lengths differ: "
                                   f"{keys.shape[-2]} vs {values.shape[-2]}")
    for arg, v in (("keys", keys), ("values", values)):
        if v.shape[-1] % num_heads:
            raise InvalidArgumentError(f"{where}: the hidden size of {arg} ({v.shape[-1]}) "
                                       f"must be divisible by num_heads={num_heads}")


def _split_heads(x, num_heads):
    if num_heads == 1:
        return x
    hidden = x.shape[-1]
    x = tensor.reshape(x, list(x.shape[:-1]) + [num_heads, hidden // num_heads])
    return tensor.transpose(x, perm=[0, 2, 1, 3])


def _combine_heads(x):
    if x.ndim == 3:
        return x
    x = tensor.transpose(x, perm=[0, 2, 1, 3])
    return tensor.reshape(x, [x.shape[0], x.shape[1], x.shape[2] * x.shape[3]])


def scaled_dot_product_attention(queries, keys, values, num_heads=1, dropout_rate=0.0):
    """Multi-head attention softmax(Q K^T / sqrt(d_k)) V over [N, L, D] inputs. With
    num_heads > 1, Q, K and V first pass through their own fc (no activation), as fluid.

    >>> # scaled_dot_product_attention(q [N, 5, 8], k [N, 7, 8], v [N, 7, 6]) -> [N, 5, 6]
    """
    _check_attention(queries, keys, values, num_heads)
    q, k, v = queries, keys, values
    if num_heads > 1:
        q = nn.fc(input=queries, size=queries.shape[-1], num_flatten_dims=2)
        k = nn.fc(input=keys, size=keys.shape[-1], num_flatten_dims=2)
        v = nn.fc(input=values, size=values.shape[-1], num_flatten_dims=2)
    q, k, v = (_split_heads(t, num_heads) for t in (q, k, v))
    scaled = math_ops.scale(x=q, scale=(keys.shape[-1] // num_heads) ** -0.5)
    product = math_ops.matmul(x=scaled, y=k, transpose_y=True)
    flat = tensor.reshape(product, [-1, product.shape[-1]], act="softmax")
    weights = tensor.reshape(flat, list(product.shape))
    if dropout_rate:
        weights = nn.dropout(weights, dropout_prob=dropout_rate, is_test=False)
    return _combine_heads(math_ops.matmul(weights, v))
