"""fluid.layers' sequence builders (fluid 1.8's fluid.layers.sequence_lod): ops on the
sequences of a LoD tensor (spmd/core/lod.py).

>>> # words = fluid.data("words", [None, 1], "int64", lod_level=1)
>>> # emb = fluid.embedding(words, [vocab, 32]); pooled = sequence_pool(emb, "sum")
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from ..ops.sequence import POOL_TYPES
from .helper import LayerHelper, check_variable

__all__ = ["im2sequence", "row_conv", "sequence_conv", "sequence_expand", "sequence_expand_as",
           "sequence_first_step", "sequence_last_step", "sequence_pool", "sequence_softmax"]

_FLOATS = {"float32", "float64"}


def sequence_pool(input, pool_type, is_test=False, pad_value=0.0):
    """Pool each sequence of `input` (a LoD tensor) into one row: pool_type 'sum', 'average',
    'sqrt' (sum / sqrt(length)), 'max', 'first' or 'last'. An empty sequence gives a row of
    `pad_value`. The result carries the LoD levels above the pooled one (none for
    lod_level 1).

    >>> # sequence_pool(emb, "average")  # [num_sequences, emb_dim]
    """
    where = "sequence_pool"
    check_variable(input, "input", where, dtypes=_FLOATS)
    if not isinstance(pool_type, str) or pool_type.upper() not in POOL_TYPES:
        raise InvalidArgumentError(
            f"{where}: pool_type must be one of {[t.lower() for t in POOL_TYPES]}, got "
            f"{pool_type!r}")
    helper = LayerHelper("sequence_pool")
    out = helper.create_variable_for_type_inference(input.dtype)
    max_index = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("sequence_pool", {"X": [input]}, {"Out": [out], "MaxIndex": [max_index]},
                     {"pooltype": pool_type.upper(), "is_test": is_test,
                      "pad_value": pad_value})
    return out


def sequence_first_step(input):
    """The first row of each sequence of `input` (sequence_pool 'first').

    >>> # sequence_first_step(emb)  # [num_sequences, emb_dim]
    """
    return sequence_pool(input, "first")


def sequence_last_step(input):
    """The last row of each sequence of `input` (sequence_pool 'last').

    >>> # sequence_last_step(emb)  # [num_sequences, emb_dim]
    """
    return sequence_pool(input, "last")


def sequence_conv(input, num_filters, filter_size=3, filter_stride=1, padding=True,
                  padding_start=None, bias_attr=None, param_attr=None, act=None, name=None):
    """Convolve each sequence of `input` ([rows, width], one level of LoD) along its rows:
    row t sees rows t + padding_start ... t + padding_start + filter_size - 1 of its own
    sequence, zeros past either end, so every sequence keeps its length. padding_start None
    means -(filter_size // 2) (centred); `padding` is ignored, as in fluid 1.8. The filter is
    [filter_size * width, num_filters]; a bias [num_filters] and `act` follow.

    >>> # sequence_conv(emb, num_filters=64, filter_size=3, act="tanh")  # [rows, 64], emb's LoD
    """
    where = "sequence_conv"
    check_variable(input, "input", where, dtypes=_FLOATS)
    if filter_stride != 1:
        raise InvalidArgumentError(
            f"{where}: filter_stride must be 1 (fluid 1.8 supports no other), got "
            f"{filter_stride}")
    if len(input.shape) != 2:
        raise InvalidArgumentError(
            f"{where}: input must be 2-D [rows, width] with LoD, got shape {list(input.shape)}")
    helper = LayerHelper("sequence_conv", bias_attr=bias_attr, param_attr=param_attr, act=act,
                         name=name)
    weight = helper.create_parameter(helper.param_attr, [filter_size * input.shape[1],
                                                         num_filters], input.dtype)
    out = helper.create_variable_for_type_inference(input.dtype)
    if padding_start is None:
        padding_start = -int(filter_size // 2)
    helper.append_op("sequence_conv", {"X": [input], "Filter": [weight]}, {"Out": [out]},
                     {"contextStride": filter_stride, "contextStart": padding_start,
                      "contextLength": filter_size})
    return helper.append_activation(helper.append_bias_op(out))


def sequence_softmax(input, use_cudnn=False, name=None):
    """Softmax over the rows of each sequence of `input` ([rows] or [rows, 1], LoD); the
    result keeps the LoD.

    >>> # sequence_softmax(scores)  # attention weights per sequence
    """
    check_variable(input, "input", "sequence_softmax", dtypes=_FLOATS)
    helper = LayerHelper("sequence_softmax", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("sequence_softmax", {"X": [input]}, {"Out": [out]},
                     {"use_cudnn": use_cudnn})
    return out


_EXPANDABLE = _FLOATS | {"int32", "int64"}


def sequence_expand(x, y, ref_level=-1, name=None):
    """Repeat x by level `ref_level` of y's LoD (-1: the last): x's row (x without LoD) or
    sequence (x with one level) i appears as often as y's sequence i has parts at that
    level. With LoD in x the result carries the repeated sequences' LoD.

    >>> # sequence_expand(x [[a], [b]], y LoD [[0, 2, 5]]) -> [[a], [a], [b], [b], [b]]
    """
    check_variable(x, "x", "sequence_expand", dtypes=_EXPANDABLE)
    check_variable(y, "y", "sequence_expand")
    helper = LayerHelper("sequence_expand", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("sequence_expand", {"X": [x], "Y": [y]}, {"Out": [out]},
                     {"ref_level": ref_level})
    return out


def sequence_expand_as(x, y, name=None):
    """Repeat row i of x as often as y's sequence i is long; the result takes y's LoD.

    >>> # sequence_expand_as(x [[a], [b]], y LoD [[0, 2, 5]]) -> [[a], [a], [b], [b], [b]]
    """
    check_variable(x, "x", "sequence_expand_as", dtypes=_EXPANDABLE)
    check_variable(y, "y", "sequence_expand_as")
    helper = LayerHelper("sequence_expand_as", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("sequence_expand_as", {"X": [x], "Y": [y]}, {"Out": [out]})
    return out


def row_conv(input, future_context_size, param_attr=None, act=None):
    """Lookahead (row) convolution, as in Deep Speech 2: out[t] = sum over j in
    0..future_context_size of input[t + j] * W[j], within each sequence ([rows, width] with
    LoD, or [batch, time, width] without). W is [future_context_size + 1, width].

    >>> # row_conv(x, future_context_size=2, act="relu")
    """
    check_variable(input, "input", "row_conv", dtypes=_FLOATS)
    helper = LayerHelper("row_conv", param_attr=param_attr, act=act)
    weight = helper.create_parameter(helper.param_attr,
                                     [future_context_size + 1, input.shape[-1]], input.dtype)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("row_conv", {"X": [input], "Filter": [weight]}, {"Out": [out]})
    return helper.append_activation(out)


def _pair(value, arg: str, size: int = 2) -> list:
    values = [value] * size if isinstance(value, int) else list(value)
    if len(values) != size or not all(isinstance(v, int) for v in values):
        raise InvalidArgumentError(f"im2sequence: {arg} must be an int or {size} ints, got "
                                   f"{value!r}")
    return values


def im2sequence(input, filter_size=1, stride=1, padding=0, input_image_size=None,
                out_stride=1, name=None):
    """Image patches as sequences: each [C, H, W] image of `input` ([N, C, H, W]) becomes a
    sequence of out_h * out_w rows of C * filter_h * filter_w values (patches row by row).
    padding is an int, [up/down, left/right] or [up, left, down, right]. With
    input_image_size ([N, 2] real heights and widths, divided by out_stride), a batch of
    several images takes only the patches inside each image's real size.

    >>> # im2sequence(img [N, 3, 32, 32], filter_size=[3, 3], stride=[2, 2])
    """
    check_variable(input, "input", "im2sequence", dtypes=_FLOATS)
    padding = [padding] * 4 if isinstance(padding, int) else list(padding)
    if len(padding) == 2:
        padding = padding + padding
    inputs = {"X": [input]}
    attrs = {"kernels": _pair(filter_size, "filter_size"), "strides": _pair(stride, "stride"),
             "paddings": _pair(padding, "padding", 4)}
    if input_image_size is not None:
        check_variable(input_image_size, "input_image_size", "im2sequence")
        inputs["Y"] = [input_image_size]
        attrs["out_stride"] = _pair(out_stride, "out_stride")
    helper = LayerHelper("im2sequence", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("im2sequence", inputs, {"Out": [out]}, attrs)
    return out


from .sequence_lod import *  # noqa: E402,F403 - the rest of fluid's sequence_lod layers
from .sequence_lod import __all__ as _lod_names  # noqa: E402

__all__ += _lod_names
