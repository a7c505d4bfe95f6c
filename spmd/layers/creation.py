"""fluid.layers (tensor.py part): tensors made from values, ranges and other tensors, plus
the arg reductions, sorting and triangles that fluid 1.8 keeps in layers/tensor.py.

>>> # idx = arange(0, 10, 2, dtype="int64")   # [0, 2, 4, 6, 8]
"""
from __future__ import annotations

import numbers

import numpy as np

from ..core.dtypes import convert_dtype
from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .manip import stack
from .tensor import assign, cast, fill_constant

__all__ = [
    "arange", "argmax", "argmin", "argsort", "create_tensor", "diag", "eye",
    "fill_constant_batch_size_like", "full", "full_like", "linspace", "ones_like", "range",
    "reverse", "tril", "triu", "zeros_like",
]

_NUMERIC = {"float32", "float64", "int32", "int64"}


def create_tensor(dtype, name=None, persistable=False):
    """An empty Variable of `dtype`, to be written by a later op (e.g. assign's output).

    >>> # t = create_tensor("float32"); assign(x, output=t)
    """
    helper = LayerHelper("create_tensor", name=name)
    return helper.create_variable(name=helper.name, dtype=dtype, persistable=persistable)


def _scalar_var(value, dtype, arg, where):
    if isinstance(value, Variable):
        return value if value.dtype == dtype else cast(value, dtype)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(
            f"{where}: {arg} must be an int, a float or a Variable, got {value!r}")
    return fill_constant([1], dtype, value)


def _range_op(start, end, step, dtype, where):
    dtype = convert_dtype(dtype)
    if dtype not in _NUMERIC:
        raise InvalidArgumentError(f"{where}: dtype must be one of {sorted(_NUMERIC)}, got {dtype}")
    helper = LayerHelper("range")
    ins = {slot: [_scalar_var(v, dtype, slot.lower(), where)]
           for slot, v in (("Start", start), ("End", end), ("Step", step))}
    out = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("range", ins, {"Out": [out]})
    return out


def range(start, end, step, dtype):  # noqa: A001 - fluid's name
    """Values from `start` up to (not including) `end` by `step` (each a number or a [1]
    Variable).

    >>> # range(0, 10, 3, "int32")  -> [0, 3, 6, 9]
    """
    return _range_op(start, end, step, dtype, "range")


def arange(start, end, step=1, dtype=None, name=None):
    """range() with step 1 and dtype float32 by default.

    >>> # arange(0, 3)  -> [0., 1., 2.]
    """
    return _range_op(start, end, step, dtype or "float32", "arange")


def linspace(start, stop, num, dtype):
    """`num` evenly spaced values from `start` to `stop`, both included.

    >>> # linspace(0, 1, 5, "float32")  -> [0, .25, .5, .75, 1]
    """
    dtype = convert_dtype(dtype)
    if dtype not in ("float32", "float64"):
        raise InvalidArgumentError(f"linspace: dtype must be float32 or float64, got {dtype}")
    helper = LayerHelper("linspace")
    ins = {"Start": [_scalar_var(start, dtype, "start", "linspace")],
           "Stop": [_scalar_var(stop, dtype, "stop", "linspace")],
           "Num": [_scalar_var(num, "int32", "num", "linspace")]}
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("linspace", ins, {"Out": [out]})
    return out


def eye(num_rows, num_columns=None, batch_shape=None, dtype="float32"):
    """An identity matrix [num_rows, num_columns], stacked to batch_shape + that if given.

    >>> # eye(2, 3)  -> [[1, 0, 0], [0, 1, 0]]
    """
    for arg, v in (("num_rows", num_rows), ("num_columns", num_columns)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise InvalidArgumentError(f"eye: {arg} must be an int >= 0, got {v!r}")
    helper = LayerHelper("eye")
    dtype = convert_dtype(dtype)
    out = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("eye", {}, {"Out": [out]},
                     {"num_rows": num_rows, "dtype": dtype,
                      "num_columns": num_rows if num_columns is None else num_columns})
    if batch_shape is not None:
        if not isinstance(batch_shape, list) or any(
                not isinstance(b, int) or b <= 0 for b in batch_shape):
            raise InvalidArgumentError(
                f"eye: batch_shape must be a list of positive ints, got {batch_shape!r}")
        for b in reversed(batch_shape):
            out = stack([out] * b, axis=0)
    return out


def diag(diagonal):
    """A square matrix with `diagonal` (a 1-D Variable or numpy array) on its diagonal.

    >>> # diag(np.array([1, 2], "int64"))  -> [[1, 0], [0, 2]]
    """
    if isinstance(diagonal, np.ndarray):
        diagonal = assign(diagonal)
    check_variable(diagonal, "diagonal", "diag", dtypes=_NUMERIC)
    helper = LayerHelper("diag")
    out = helper.create_variable_for_type_inference(diagonal.dtype, stop_gradient=True)
    helper.append_op("diag", {"Diagonal": [diagonal]}, {"Out": [out]})
    return out


def fill_constant_batch_size_like(input, shape, dtype, value, input_dim_idx=0,
                                  output_dim_idx=0, force_cpu=False):
    """fill_constant whose dim `output_dim_idx` is taken from input's dim `input_dim_idx`
    at run time (the batch size).

    >>> # h0 = fill_constant_batch_size_like(x, shape=[-1, 16], dtype="float32", value=0.0)
    """
    helper = LayerHelper("fill_constant_batch_size_like")
    check_variable(input, "input", "fill_constant_batch_size_like")
    dtype = convert_dtype(dtype)
    out = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    text = str(int(value)) if dtype in ("int32", "int64") else str(float(value))
    helper.append_op("fill_constant_batch_size_like", {"Input": [input]}, {"Out": [out]},
                     {"shape": [int(d) for d in shape], "dtype": dtype, "value": float(value),
                      "str_value": text, "input_dim_idx": int(input_dim_idx),
                      "output_dim_idx": int(output_dim_idx), "force_cpu": bool(force_cpu)})
    return out


def full(shape, fill_value, out=None, dtype=None, device=None, stop_gradient=True, name=None):
    """fill_constant with fluid 2.0-preview's argument names (dtype float32 by default).

    >>> # full([2, 2], 7.0)
    """
    dtype = convert_dtype(dtype or "float32")
    out = fill_constant(shape, dtype, fill_value, out=out, name=name)
    out.stop_gradient = stop_gradient
    return out


def _fill_like(layer, x, value, out, dtype):
    helper = LayerHelper(layer)
    check_variable(x, "x", layer)
    dtype = x.dtype if dtype is None else convert_dtype(dtype)
    if out is None:
        out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("fill_any_like", {"X": [x]}, {"Out": [out]},
                     {"value": float(value), "dtype": dtype})
    return out


def full_like(input, fill_value, out=None, dtype=None, device=None, stop_gradient=True,
              name=None):
    """A tensor shaped like `input` filled with `fill_value` (dtype: input's by default).

    >>> # full_like(x, 2.0)
    """
    out = _fill_like("full_like", input, fill_value, out, dtype)
    out.stop_gradient = stop_gradient
    return out


def ones_like(x, out=None):
    """Ones shaped like x, of x's dtype.

    >>> # ones_like(x)
    """
    return _fill_like("ones_like", x, 1.0, out, None)


def zeros_like(x, out=None):
    """Zeros shaped like x, of x's dtype.

    >>> # zeros_like(x)
    """
    helper = LayerHelper("zeros_like")
    check_variable(x, "x", "zeros_like")
    if out is None:
        out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("fill_zeros_like", {"X": [x]}, {"Out": [out]})
    out.stop_gradient = True
    return out


def _arg(op, x, axis):
    helper = LayerHelper(op)
    check_variable(x, "x", op.replace("_", ""))
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op(op, {"X": [x]}, {"Out": [out]}, {"axis": int(axis)})
    return out


def argmax(x, axis=0):
    """Index of the largest value along `axis` (int64, the axis removed).

    >>> # argmax(x [3, 4], axis=1)  -> shape [3]
    """
    return _arg("arg_max", x, axis)


def argmin(x, axis=0):
    """Index of the smallest value along `axis` (int64, the axis removed).

    >>> # argmin(x [3, 4], axis=0)  -> shape [4]
    """
    return _arg("arg_min", x, axis)


def argsort(input, axis=-1, descending=False, name=None):
    """(sorted values, int64 indices) of `input` along `axis`.

    >>> # out, ids = argsort(x, axis=1, descending=True)
    """
    helper = LayerHelper("argsort", name=name)
    check_variable(input, "input", "argsort")
    out = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    ids = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("argsort", {"X": [input]}, {"Out": [out], "Indices": [ids]},
                     {"axis": int(axis), "descending": bool(descending)})
    return out, ids


def reverse(x, axis):
    """x with the order of its entries reversed along `axis` (an int or a list).

    >>> # reverse(x, axis=[0, 1])
    """
    helper = LayerHelper("reverse")
    check_variable(x, "x", "reverse")
    axis = [axis] if isinstance(axis, int) else list(axis)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("reverse", {"X": [x]}, {"Out": [out]}, {"axis": axis})
    return out


def _tril_triu(layer, input, diagonal, name):
    helper = LayerHelper(layer, name=name)
    check_variable(input, "input", layer)
    if isinstance(diagonal, bool) or not isinstance(diagonal, int):
        raise InvalidArgumentError(f"{layer}: diagonal must be an int, got {diagonal!r}")
    if input.ndim < 2:
        raise InvalidArgumentError(
            f"{layer}: input must have rank >= 2, got {input.name} {list(input.shape)}")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("tril_triu", {"X": [input]}, {"Out": [out]},
                     {"diagonal": diagonal, "lower": layer == "tril"})
    return out


def tril(input, diagonal=0, name=None):
    """The lower triangle of the last two dims (entries above `diagonal` set to 0).

    >>> # tril(x, diagonal=-1)
    """
    return _tril_triu("tril", input, diagonal, name)


def triu(input, diagonal=0, name=None):
    """The upper triangle of the last two dims (entries below `diagonal` set to 0).

    >>> # triu(x, diagonal=1)
    """
    return _tril_triu("triu", input, diagonal, name)
