"""fluid.data_feeder: DataFeeder (spmd/reader/feeder.py), and the argument checks layers and
custom layers use (check_type, check_dtype, check_variable_and_dtype, convert_dtype).

>>> check_dtype("float32", "x", ["float32", "float64"], "my_layer")
>>> convert_dtype("int64")
'int64'
"""
from __future__ import annotations

from ..core.dtypes import convert_dtype as _convert
from ..core.variable import Variable
from ..reader.feeder import DataFeeder

__all__ = ["DataFeeder"]


def convert_dtype(dtype) -> str:
    """The dtype's name ('float32', ...) for any spelling (VarType.FP32, np.float32, ...)."""
    return _convert(dtype)


def check_type(input, input_name, expected_type, op_name, extra_message="") -> None:
    """TypeError unless `input` is an `expected_type` (a type or a tuple of types)."""
    if not isinstance(input, expected_type):
        raise TypeError(f"The type of '{input_name}' in {op_name} must be {expected_type}, "
                        f"but received {type(input)}. {extra_message}")


def check_dtype(input_dtype, input_name, expected_dtype, op_name, extra_message="") -> None:
    """TypeError unless `input_dtype` is one of `expected_dtype` (names)."""
    name = _convert(input_dtype)
    if name not in expected_dtype:
        raise TypeError(f"The data type of '{input_name}' in {op_name} must be "
                        f"{expected_dtype}, but received {name}. {extra_message}")


def check_variable_and_dtype(input, input_name, expected_dtype, op_name,
                             extra_message="") -> None:
    """check_type(Variable) and check_dtype together."""
    check_type(input, input_name, Variable, op_name, extra_message)
    check_dtype(input.dtype, input_name, expected_dtype, op_name, extra_message)
