"""Kernel: c_allgather_rows (spmd/ops/sparse.py). Ranks hold different numbers of rows, so
the counts are gathered first; then one gather of every rank's row ids and values packed as
bytes, padded to the largest count, and the padding dropped. Both run at once, after anything
already issued."""
from __future__ import annotations

import numpy as np

from ..core.selected_rows import SelectedRows
from ..errors import InvalidArgumentError
from .registry import kernel


@kernel("c_allgather_rows", context=True)
def c_allgather_rows(xp, ins, attrs, want, ctx):
    g = ins["X"]
    if not isinstance(g, SelectedRows):
        raise InvalidArgumentError(
            f"c_allgather_rows gathers a sparse gradient (SelectedRows, from "
            f"embedding(is_sparse=True)), got a dense {type(g).__name__}")
    comm = ctx.comm
    if comm.size == 1:
        return {"Out": g}
    counts = comm.iallgather(np.array([len(g.rows)], dtype=np.int64), overlap=False).wait()
    counts = [int(c) for c in np.asarray(counts).reshape(-1)]
    most = max(counts)
    # one gather of every rank's rows and values as bytes, padded to the longest: the row ids
    # in the first most*8 bytes, the values after them
    tail = tuple(g.value.shape[1:])
    value_bytes = int(np.prod(tail, dtype=np.int64)) * g.value.dtype.itemsize
    mine = xp.zeros(most * (8 + value_bytes), dtype=np.uint8)
    n = len(g.rows)
    mine[:n * 8] = xp.ascontiguousarray(g.rows, dtype=np.int64).view(np.uint8)
    mine[most * 8:most * 8 + n * value_bytes] = \
        xp.ascontiguousarray(g.value).reshape(-1).view(np.uint8)
    every = comm.iallgather(mine, overlap=False).wait()
    rows = [every[r, :c * 8].view(np.int64) for r, c in enumerate(counts)]
    values = [every[r, most * 8:most * 8 + c * value_bytes].view(g.value.dtype).reshape(
        (c,) + tail) for r, c in enumerate(counts)]
    return {"Out": SelectedRows(xp.concatenate(rows), xp.concatenate(values), g.height)}


def _selected_rows(x, op: str) -> SelectedRows:
    if not isinstance(x, SelectedRows):
        raise InvalidArgumentError(
            f"{op} takes a sparse gradient (SelectedRows: the gradient of an "
            f"embedding(is_sparse=True) table), got a dense {type(x).__name__}")
    return x


@kernel("merge_selected_rows")
def merge_selected_rows(xp, ins, attrs, want):
    return {"Out": _selected_rows(ins["X"], "merge_selected_rows").merged(xp)}


@kernel("get_tensor_from_selected_rows")
def get_tensor_from_selected_rows(xp, ins, attrs, want):
    return {"Out": _selected_rows(ins["X"], "get_tensor_from_selected_rows").value.copy()}
