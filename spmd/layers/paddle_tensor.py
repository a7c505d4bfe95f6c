"""paddle-level tensor functions (paddle.mean, paddle.matmul, paddle.reshape, ...) with 2.x
argument names, as thin wrappers over the fluid builders, for static programs.

>>> # y = paddle.reshape(paddle.matmul(x, w), [-1, 4, 8])
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from ..core.variable import Variable
from ..errors import InvalidArgumentError
from . import index as _index
from . import math_ops as _m
from . import nn as _nn
from . import tensor as _t
from .helper import LayerHelper, check_variable
from .tensor import cast, create_global_var, create_parameter, slice

__all__ = [
    "add", "cast", "clip", "concat", "create_global_var", "create_parameter", "divide", "exp",
    "flatten", "full", "gather", "log", "matmul", "max", "maximum", "mean", "minimum",
    "multiply", "ones", "ones_like", "pow", "reshape", "scale", "slice", "split", "sqrt",
    "square", "squeeze", "subtract", "sum", "tanh", "topk", "transpose", "unsqueeze", "where",
    "zeros", "zeros_like",
]

exp, log, sqrt, square, tanh = _m.exp, _m.log, _m.sqrt, _m.square, _m.tanh
scale = _m.scale


def _axes(axis):
    return None if axis is None else (list(axis) if isinstance(axis, (list, tuple)) else [axis])


def mean(x, axis=None, keepdim=False, name=None):
    """Mean over `axis` (None: all elements, shape [1] as fluid 1.8)."""
    return _m.reduce_mean(x, dim=_axes(axis), keep_dim=keepdim, name=name)


def sum(x, axis=None, dtype=None, keepdim=False, name=None):  # noqa: A001 - paddle's name
    if dtype is not None:
        x = cast(x, dtype)
    return _m.reduce_sum(x, dim=_axes(axis), keep_dim=keepdim, name=name)


def max(x, axis=None, keepdim=False, name=None):  # noqa: A001 - paddle's name
    return _m.reduce_max(x, dim=_axes(axis), keep_dim=keepdim, name=name)


def matmul(x, y, transpose_x=False, transpose_y=False, name=None):
    return _m.matmul(x, y, transpose_x=transpose_x, transpose_y=transpose_y, name=name)


def add(x, y, name=None):
    return _m.elementwise_add(x, y, name=name)


def subtract(x, y, name=None):
    return _m.elementwise_sub(x, y, name=name)


def multiply(x, y, name=None):
    return _m.elementwise_mul(x, y, name=name)


def divide(x, y, name=None):
    return _m.elementwise_div(x, y, name=name)


def maximum(x, y, name=None):
    return _m.elementwise_max(x, y, name=name)


def minimum(x, y, name=None):
    return _m.elementwise_min(x, y, name=name)


def pow(x, y, name=None):  # noqa: A001 - paddle's name
    """x ** y for a Python number y."""
    if not isinstance(y, (int, float)) or isinstance(y, bool):
        raise InvalidArgumentError(
            f"pow: the exponent must be a Python number, got {type(y).__name__}")
    return _m.pow(x, factor=float(y), name=name)


def clip(x, min=None, max=None, name=None):  # noqa: A002 - paddle's argument names
    """Clamp to [min, max]; a bound left None is the dtype's largest finite value."""
    check_variable(x, "x", "clip")
    big = float(np.finfo(x.dtype).max) if x.dtype.startswith("float") else float(2 ** 31 - 1)
    lo, hi = -big if min is None else min, big if max is None else max
    if lo > hi:
        raise InvalidArgumentError(f"clip: min={lo} must be <= max={hi}")
    # the clip op directly: fluid 1.8's layers.clip refuses integer tensors, paddle's does not
    helper = LayerHelper("clip", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("clip", {"X": [x]}, {"Out": [out]}, {"min": float(lo), "max": float(hi)})
    return out


def reshape(x, shape, name=None):
    return _t.reshape(x, shape, name=name)


def transpose(x, perm, name=None):
    return _t.transpose(x, perm, name=name)


def concat(x, axis=0, name=None):
    return _t.concat(x, axis=axis, name=name)


def split(x, num_or_sections, axis=0, name=None):
    return _t.split(x, num_or_sections, dim=axis, name=name)


def squeeze(x, axis=None, name=None):
    """x without the size-1 dims in `axis` (None: every size-1 dim)."""
    check_variable(x, "x", "squeeze")
    axes = _axes(axis)
    if axes is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    return _t.squeeze(x, axes, name=name)


def unsqueeze(x, axis, name=None):
    return _t.unsqueeze(x, _axes(axis), name=name)


def flatten(x, start_axis=0, stop_axis=-1, name=None):
    """Merge dims start_axis..stop_axis into one (as a reshape: the dims after the merged
    range must be known)."""
    check_variable(x, "x", "flatten")
    rank = x.ndim
    start, stop = start_axis % builtins.max(rank, 1), stop_axis % builtins.max(rank, 1)
    if start > stop:
        raise InvalidArgumentError(
            f"flatten: start_axis={start_axis} must not come after stop_axis={stop_axis}")
    merged = x.shape[start:stop + 1]
    after = x.shape[stop + 1:]
    if any(d < 0 for d in after) or (any(d < 0 for d in merged) and any(
            d < 0 for d in x.shape[:start])):
        raise InvalidArgumentError(
            f"flatten: cannot flatten {x.name} {list(x.shape)} at [{start_axis}, {stop_axis}] "
            f"with more than one unknown dim")
    merged_dim = -1 if any(d < 0 for d in merged) else math.prod(merged)
    shape = [0] * start + [merged_dim] + list(after)
    return _t.reshape(x, shape, name=name)


def zeros(shape, dtype=None, name=None):
    return _t.fill_constant(shape, dtype or "float32", 0.0)


def ones(shape, dtype=None, name=None):
    return _t.fill_constant(shape, dtype or "float32", 1.0)


def full(shape, fill_value, dtype=None, name=None):
    return _t.fill_constant(shape, dtype or "float32", fill_value)


def zeros_like(x, dtype=None, name=None):
    return _fill_like(x, 0.0, dtype)


def ones_like(x, dtype=None, name=None):
    return _fill_like(x, 1.0, dtype)


def _fill_like(x, value, dtype):
    helper = LayerHelper("fill_any_like")
    check_variable(x, "x", "fill_any_like")
    out = helper.create_variable_for_type_inference(dtype or x.dtype, stop_gradient=True)
    helper.append_op("fill_any_like", {"X": [x]}, {"Out": [out]},
                     {"value": value, "dtype": dtype})
    return out


def gather(x, index, axis=None, name=None):
    if axis not in (None, 0):
        raise InvalidArgumentError(f"gather: only axis 0 is supported, got axis={axis}")
    # paddle 2.x sums the gradients of repeated indices (fluid 1.8's default keeps the last)
    return _t.gather(x, index, overwrite=False)


def topk(x, k, axis=-1, largest=True, sorted=True, name=None):  # noqa: A002
    """(values, indices) of the k largest along the last axis."""
    check_variable(x, "x", "topk")
    if axis is not None and axis not in (-1, x.ndim - 1):
        raise InvalidArgumentError(f"topk: only the last axis is supported, got axis={axis}")
    if not largest:
        raise InvalidArgumentError("topk: largest=False is not supported")
    return _nn.topk(x, k, name=name)


def where(condition, x=None, y=None, name=None):
    """Elements of `x` where `condition` is True, else of `y` (paddle.where).

    `condition` is bool; `x` and `y` are Variables of one dtype or Python numbers (a number
    takes the other operand's dtype; two numbers give int64 if both are ints, else float32, as
    paddle.to_tensor makes them). The three broadcast numpy-style to one shape, as paddle 2.x
    does it in a static program (adding zeros), and the `where` op runs on that shape.
    Gradients flow to `x` and `y` (summed over broadcast dims). With neither `x` nor `y` it is
    `nonzero(condition, as_tuple=True)`.

    >>> # x: [N, 3] float32; keep the positive entries, zero the others
    >>> # out = paddle.where(x > 0, x, 0.0)
    >>> # out = paddle.where(mask, x, paddle.zeros_like(x))   # mask: [N, 1] bool broadcasts
    """
    if x is None and y is None:
        return _index.nonzero(condition, as_tuple=True)
    if x is None or y is None:
        raise InvalidArgumentError("where: give both x and y, or neither")
    check_variable(condition, "condition", "where", dtypes={"bool"})
    x, y = _where_operand(x, y, "x"), _where_operand(y, x, "y")
    if x.dtype != y.dtype:
        raise InvalidArgumentError(
            f"where: x ({x.name}) is {x.dtype} but y ({y.name}) is {y.dtype}: cast one of them")
    if not (list(condition.shape) == list(x.shape) == list(y.shape)):
        # paddle 2.x's static broadcast: add zeros shaped like all three to each of them
        zeros = add(add(zeros_like(x), zeros_like(y)), cast(zeros_like(condition), x.dtype))
        condition = cast(add(cast(condition, x.dtype), zeros), "bool")
        x, y = add(x, zeros), add(y, zeros)
    helper = LayerHelper("where", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("where", {"Condition": [condition], "X": [x], "Y": [y]}, {"Out": [out]})
    return out


def _where_operand(value, other, arg: str):
    """`value` as a Variable: a Python number becomes a [1] tensor of `other`'s dtype."""
    if not isinstance(value, (int, float, np.number)) or isinstance(value, bool):
        return check_variable(value, arg, "where")
    if isinstance(other, Variable):
        dtype = other.dtype
    else:
        dtype = "int64" if isinstance(value, (int, np.integer)) and isinstance(
            other, (int, np.integer)) else "float32"
    if not dtype.startswith("float") and not float(value).is_integer():
        raise InvalidArgumentError(
            f"where: {arg}={value!r} is not a whole number but the other operand is {dtype}: "
            f"cast that operand to a float dtype first")
    return _t.fill_constant([1], dtype, value)
