"""Data layers: the variables a program is fed. fluid.layers.data (batch dim prepended),
fluid.data and paddle.static.data (shape as given, None = any size).

>>> # x = data(name="x", shape=[784])            # shape [-1, 784]
>>> # y = fluid_data(name="y", shape=[None, 1], dtype="int64")
"""
from __future__ import annotations

import numbers

from ..core.dtypes import convert_dtype
from ..errors import InvalidArgumentError
from .helper import LayerHelper

# the fluid.layers names this module provides (fluid_data and static_data are imported by name)
__all__ = ["data"]


def _dims(shape, where: str) -> list[int]:
    if not isinstance(shape, (list, tuple)):
        raise InvalidArgumentError(f"{where}: shape must be a list, got {shape!r}")
    dims = []
    for d in shape:
        if d is None:
            dims.append(-1)
        elif isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= -1:
            dims.append(int(d))
        else:
            raise InvalidArgumentError(
                f"{where}: shape entries must be ints >= 0, -1 or None, got {d!r} in {shape}")
    return dims


def _data_var(where: str, name, dims, dtype, lod_level, stop_gradient):
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{where}: name must be a non-empty str, got {name!r}")
    helper = LayerHelper("data", name=name)
    return helper.create_global_variable(shape=dims, dtype=convert_dtype(dtype), name=name,
                                         persistable=False, stop_gradient=stop_gradient,
                                         lod_level=lod_level, is_data=True, need_check_feed=True)


def data(name, shape, append_batch_size=True, dtype="float32", lod_level=0,
         type="LOD_TENSOR", stop_gradient=True):
    """fluid.layers.data: a fed variable whose shape gets a leading batch dim -1, unless a dim
    is already None or -1 (then the shape is taken as given).

    >>> # data(name="img", shape=[1, 28, 28]).shape == (-1, 1, 28, 28)
    """
    dims = _dims(shape, "fluid.layers.data")
    if any(d == -1 for d in dims):
        append_batch_size = False
    if append_batch_size:
        dims = [-1] + dims
    return _data_var("fluid.layers.data", name, dims, dtype, lod_level, stop_gradient)


def fluid_data(name, shape, dtype="float32", lod_level=0):
    """fluid.data: a fed variable of exactly `shape` (None or -1 = any size, no batch dim
    added); a fed array of another shape is refused.

    >>> # fluid_data(name="x", shape=[None, 784]).shape == (-1, 784)
    """
    return _data_var("fluid.data", name, _dims(shape, "fluid.data"), dtype, lod_level, True)


def static_data(name, shape, dtype=None, lod_level=0):
    """paddle.static.data: as fluid.data, dtype None meaning float32."""
    return _data_var("paddle.static.data", name, _dims(shape, "paddle.static.data"),
                     "float32" if dtype is None else dtype, lod_level, True)
