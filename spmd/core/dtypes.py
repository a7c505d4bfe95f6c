"""Data types: every user spelling ('float32', np.float32, VarType.FP32) becomes one numpy dtype."""
from __future__ import annotations

import enum

import numpy as np

from ..errors import InvalidArgumentError


class VarType(enum.IntEnum):
    """fluid's `core.VarDesc.VarType` codes, kept so fluid code that names them still runs."""

    BOOL = 0
    INT16 = 1
    INT32 = 2
    INT64 = 3
    FP16 = 4
    FP32 = 5
    FP64 = 6
    UINT8 = 20
    INT8 = 21
    # the kinds of variable (not dtypes): fluid programs compare `var.type` with these
    LOD_TENSOR = 7
    SELECTED_ROWS = 8
    FEED_MINIBATCH = 9
    FETCH_LIST = 10
    STEP_SCOPES = 11
    LOD_RANK_TABLE = 12
    LOD_TENSOR_ARRAY = 13
    PLACE_LIST = 14
    READER = 15
    RAW = 17

    # spmd's dtypes and variable kinds are names: `var.dtype == VarType.FP32` and
    # `var.type == VarType.LOD_TENSOR`, as fluid programs write them, hold
    def __eq__(self, other):
        if isinstance(other, str):
            return _VARTYPE_TO_NAME.get(self, self.name) == other
        return int.__eq__(self, other)

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = int.__hash__


_VARTYPE_TO_NAME = {
    VarType.BOOL: "bool",
    VarType.INT16: "int16",
    VarType.INT32: "int32",
    VarType.INT64: "int64",
    VarType.FP16: "float16",
    VarType.FP32: "float32",
    VarType.FP64: "float64",
    VarType.UINT8: "uint8",
    VarType.INT8: "int8",
}
SUPPORTED = frozenset(_VARTYPE_TO_NAME.values())
FLOATING = frozenset({"float16", "float32", "float64"})


def convert_dtype(dtype) -> str:
    """Return the canonical dtype name ('float32', 'int64', ...) of any accepted spelling.

    >>> convert_dtype(np.float64), convert_dtype("float32"), convert_dtype(VarType.INT64)
    ('float64', 'float32', 'int64')
    """
    if isinstance(dtype, VarType):
        if dtype not in _VARTYPE_TO_NAME:
            raise InvalidArgumentError(
                f"VarType.{dtype.name} is a kind of variable, not a dtype: expected one of "
                f"{sorted(v.name for v in _VARTYPE_TO_NAME)}")
        return _VARTYPE_TO_NAME[dtype]
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in SUPPORTED:
        raise InvalidArgumentError(
            f"unsupported dtype {dtype!r}: expected one of {sorted(SUPPORTED)}"
        )
    return name


def is_floating(dtype) -> bool:
    return convert_dtype(dtype) in FLOATING
