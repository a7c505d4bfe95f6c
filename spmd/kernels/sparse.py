"""Kernel: c_allgather_rows (spmd/ops/sparse.py). Ranks hold different numbers of rows, so
the counts are gathered first; rows and values are then gathered padded to the largest count
and the padding dropped. Both run at once, after anything already issued."""
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
    counts = np.asarray(counts).reshape(-1)
    most = int(counts.max())
    rows = xp.zeros(most, dtype=np.int64)
    rows[:len(g.rows)] = g.rows
    value = xp.zeros((most,) + tuple(g.value.shape[1:]), dtype=g.value.dtype)
    value[:len(g.rows)] = g.value
    all_rows = comm.iallgather(rows, overlap=False).wait()
    all_values = comm.iallgather(value, overlap=False).wait()
    keep = [slice(0, int(c)) for c in counts]
    return {"Out": SelectedRows(
        xp.concatenate([all_rows[r][k] for r, k in enumerate(keep)]),
        xp.concatenate([all_values[r][k] for r, k in enumerate(keep)]), g.height)}

