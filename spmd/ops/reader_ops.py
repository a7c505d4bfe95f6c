"""The reader ops fluid 1.8's py_reader puts in programs: `create_py_reader` (startup: makes
the reader), `create_double_buffer_reader` (main: its read-ahead wrapper) and `read` (main,
read_file's: the batch's data variables). spmd's py_reader reads through a run hook
(spmd/reader/py_reader.py), so the executor runs a program without these ops
(spmd/executor/feed_fetch_ops.py) and they have no kernel; they are in the program so that it
lists fluid's ops (Program._inference_optimize drops the ops up to `read`, as fluid's).
"""
from __future__ import annotations

from .registry import define_op


@define_op("create_py_reader", inputs=["blocking_queue?"], outputs=["Out"], grad=None,
           attrs={"capacity": ("int", 0), "shape_concat": ("ints", []),
                  "ranks": ("ints", []), "lod_levels": ("ints", [])})
def _create_py_reader(ctx):
    """Out is the READER variable."""


@define_op("create_double_buffer_reader", inputs=["UnderlyingReader"], outputs=["Out"],
           grad=None)
def _create_double_buffer_reader(ctx):
    """Out is the READER variable reading ahead of UnderlyingReader."""


@define_op("read", inputs=["Reader"], outputs=["Out*"], grad=None,
           attrs={"throw_eof_exp": ("bool", True)})
def _read(ctx):
    """Out are the data variables (declared with the reader's shapes and dtypes)."""
