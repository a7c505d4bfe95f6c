"""Data layers: the variables a program is fed. fluid.layers.data (batch dim prepended),
fluid.data and paddle.static.data (shape as given, None = any size).

>>> # x = data(name="x", shape=[784])            # shape [-1, 784]
>>> # y = fluid_data(name="y", shape=[None, 1], dtype="int64")
"""
from __future__ import annotations

import numbers

from ..core.dtypes import convert_dtype
from ..errors import ArgumentTypeError, InvalidArgumentError
from .helper import LayerHelper

# the fluid.layers names this module provides (fluid_data and static_data are imported by name)
__all__ = ["create_py_reader_by_data", "data", "double_buffer", "load", "py_reader",
           "read_file"]


def _dims(shape, where: str) -> list[int]:
    if not isinstance(shape, (list, tuple)):  # a TypeError, as fluid's check_type
        raise ArgumentTypeError(f"{where}: shape must be a list or tuple, got {shape!r}")
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


def _data_var(where: str, name, dims, dtype, lod_level, stop_gradient, need_check_feed=True):
    if not isinstance(name, str):  # a TypeError, as fluid's check_type
        raise ArgumentTypeError(f"{where}: name must be a str, got {name!r}")
    if not name:
        raise InvalidArgumentError(f"{where}: name must be a non-empty str, got {name!r}")
    helper = LayerHelper("data", name=name)
    return helper.create_global_variable(shape=dims, dtype=convert_dtype(dtype), name=name,
                                         persistable=False, stop_gradient=stop_gradient,
                                         lod_level=lod_level, is_data=True,
                                         need_check_feed=need_check_feed)


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
    # fluid 1.8 checks no feed of layers.data against its shape (fluid.data's are checked)
    return _data_var("fluid.layers.data", name, dims, dtype, lod_level, stop_gradient,
                     need_check_feed=False)


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


def py_reader(capacity, shapes, dtypes, lod_levels=None, name=None, use_double_buffer=True):
    """fluid.layers.py_reader: a reader of `capacity` batches, each holding arrays of `shapes`
    and `dtypes`; fluid.layers.read_file(reader) gives its variables.

    >>> # reader = py_reader(capacity=4, shapes=[[-1, 2], [-1, 1]], dtypes=["float32", "int64"])
    >>> # x, y = read_file(reader)
    """
    from ..reader.py_reader import PyReaderVariable

    return PyReaderVariable(capacity, shapes, dtypes, lod_levels, name, use_double_buffer)


def create_py_reader_by_data(capacity, feed_list, name=None, use_double_buffer=True):
    """fluid.layers.create_py_reader_by_data: py_reader with the shapes and dtypes of the data
    variables in `feed_list`.

    >>> # reader = create_py_reader_by_data(capacity=4, feed_list=[img, label])
    """
    from ..core.variable import Variable

    if not isinstance(feed_list, list) or not all(isinstance(v, Variable) for v in feed_list):
        raise InvalidArgumentError(
            f"create_py_reader_by_data: feed_list must be a list of Variables, got {feed_list!r}")
    return py_reader(capacity, [v.shape for v in feed_list], [v.dtype for v in feed_list],
                     [v.lod_level for v in feed_list], name, use_double_buffer)


def double_buffer(reader, place=None, name=None):
    """fluid.layers.double_buffer: the reader itself, since spmd's readers always read ahead
    in a background thread.

    >>> # reader = double_buffer(py_reader(...))
    """
    return reader


def read_file(reader):
    """fluid.layers.read_file: the variables `reader` fills on each run (one, or a list).

    >>> # img, label = read_file(reader)
    """
    from ..core.program import default_main_program
    from ..reader.py_reader import read_reader

    out = read_reader(reader, default_main_program().global_block())
    return out[0] if len(out) == 1 else out


def load(out, file_path, load_as_fp16=None):
    """fluid.layers.load: an op that fills `out` from `file_path`, a file written by
    fluid.io.save_vars / save_params / save_persistables (one variable per file; the .npy
    extension may be left out).

    >>> # load(w, "ckpt/fc_0.w_0")
    """
    helper = LayerHelper("load")
    attrs = {"file_path": file_path}
    if load_as_fp16 is not None:
        attrs["load_as_fp16"] = load_as_fp16
    helper.append_op(type="load", inputs={}, outputs={"Out": [out]}, attrs=attrs)
