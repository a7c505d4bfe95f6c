"""fluid.layers tensor arrays (create_array, array_write, array_read, array_length,
tensor_array_to_tensor) and is_empty.

A tensor array (a Variable of type LOD_TENSOR_ARRAY) holds a list of tensors at run time; it
is written and read by an int64 [1] index, typically inside a While body.

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.layers.fill_constant([2, 3], "float32", 1.0)
...     i = fluid.layers.fill_constant([1], "int64", 0)
...     arr = fluid.layers.array_write(x, i)
...     y = fluid.layers.array_read(arr, i)
"""
from __future__ import annotations

from ..core.dtypes import convert_dtype
from ..core.unique_name import generate
from ..core.variable import Variable
from .helper import LayerHelper
from .sub_block import ControlFlowTypeError, _check_var

__all__ = ["array_length", "array_read", "array_write", "create_array", "is_empty",
           "tensor_array_to_tensor"]

ARRAY = "LOD_TENSOR_ARRAY"


def _check_array(array, where: str):
    if not isinstance(array, Variable) or array.type != ARRAY:
        raise ControlFlowTypeError(
            f"{where}: array must be a tensor array Variable (fluid.layers.create_array), got "
            f"{getattr(array, 'type', type(array).__name__)}")
    return array


def create_array(dtype):
    """An empty tensor array of `dtype` elements.

    >>> # arr = fluid.layers.create_array("float32")
    """
    helper = LayerHelper("array")
    array = helper.create_variable(f"{helper.name}.out", dtype=convert_dtype(dtype), type=ARRAY)
    helper.append_op("create_array", {}, {"Out": [array]}, {"dtype": array.dtype})
    return array


def array_write(x, i, array=None):
    """Write `x` at position `i` (int64 [1]) of `array` (a new one when None); writing past
    the end grows the array. Returns the array.

    >>> # arr = fluid.layers.array_write(x, i, array=arr)
    """
    _check_var(x, "x", "array_write")
    _check_var(i, "i", "array_write", {"int64"})
    helper = LayerHelper("array_write")
    inputs = {"X": [x], "I": [i]}
    if array is None:
        array = helper.create_variable(f"{helper.name}.out", dtype=x.dtype, type=ARRAY)
    else:
        inputs["Array"] = [_check_array(array, "array_write")]
    helper.append_op("write_to_array", inputs, {"Out": [array]})
    return array


def array_read(array, i):
    """The tensor at position `i` (int64 [1]) of `array`.

    >>> # x = fluid.layers.array_read(arr, i)
    """
    _check_array(array, "array_read")
    _check_var(i, "i", "array_read", {"int64"})
    helper = LayerHelper("array_read")
    out = helper.create_variable_for_type_inference(array.dtype)
    helper.append_op("read_from_array", {"X": [array], "I": [i]}, {"Out": [out]})
    return out


def array_length(array):
    """The number of elements of `array`, an int64 [1] Variable.

    >>> # n = fluid.layers.array_length(arr)
    """
    _check_array(array, "array_length")
    helper = LayerHelper("array_length")
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("lod_array_length", {"X": [array]}, {"Out": [out]})
    return out


def tensor_array_to_tensor(input, axis=1, name=None, use_stack=False):
    """The array's tensors concatenated (or stacked, `use_stack`) along `axis`, and an int32
    tensor of each one's size along it.

    >>> # out, sizes = fluid.layers.tensor_array_to_tensor(arr, axis=0)
    """
    _check_array(input, "tensor_array_to_tensor")
    helper = LayerHelper("tensor_array_to_tensor", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    index = helper.create_variable(generate(f"{helper.name}.tmp"), dtype="int32",
                                   stop_gradient=True)
    helper.append_op("tensor_array_to_tensor", {"X": [input]},
                     {"Out": [out], "OutIndex": [index]},
                     {"axis": int(axis), "use_stack": bool(use_stack)})
    return out, index


def is_empty(x, cond=None):
    """Whether `x` has no elements: a bool [1] Variable (written into `cond` when given).

    >>> # empty = fluid.layers.is_empty(x)
    """
    _check_var(x, "x", "is_empty", {"float32", "float64", "int32", "int64"})
    helper = LayerHelper("is_empty")
    if cond is None:
        cond = helper.create_variable_for_type_inference("bool", stop_gradient=True)
    else:
        _check_var(cond, "cond", "is_empty", {"bool"})
    helper.append_op("is_empty", {"X": [x]}, {"Out": [cond]})
    return cond
