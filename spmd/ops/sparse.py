"""Op definition: c_allgather_rows, data parallelism's aggregation of a sparse (SelectedRows)
gradient: every rank's rows and values end to end, in rank order, on every rank.

Summing per-row gradients over ranks is the same as concatenating them (a repeated row adds
up wherever it is applied), so this equals the dense all-reduce without ever making the
[vocab, dim] table: each rank sends only the rows its batch looked up.

>>> # rank 0 rows [3, 1], rank 1 rows [1]  ->  rows [3, 1, 1] everywhere
"""
from __future__ import annotations

from .registry import define_op


@define_op("c_allgather_rows", inputs=["X"], outputs=["Out"], attrs={"ring_id": ("int", 0)},
           grad=None, collective=True)
def _c_allgather_rows(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


# fluid.layers.merge_selected_rows / get_tensor_from_selected_rows: a sparse gradient's rows
# merged (each once, summed), and its value rows as a dense tensor
@define_op("merge_selected_rows", inputs=["X"], outputs=["Out"], grad=None)
def _merge_selected_rows(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


@define_op("get_tensor_from_selected_rows", inputs=["X"], outputs=["Out"], grad=None)
def _get_tensor_from_selected_rows(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", (-1,) + tuple(x.shape[1:]), x.dtype)
