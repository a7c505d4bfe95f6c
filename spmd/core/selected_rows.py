"""SelectedRows: fluid's sparse gradient of an embedding table (`embedding(is_sparse=True)`).

Only the rows a batch looked up get a gradient, so instead of a [vocab, dim] array of mostly
zeros the gradient is `rows` (int64 row ids, repeated when an id was looked up several times)
and `value` ([len(rows), dim], one gradient row per id), of a table `height` rows high. The
optimizers apply it to those rows only; data parallelism gathers every rank's rows and values
instead of reducing a dense table.

>>> import numpy as np
>>> g = SelectedRows(np.array([3, 1, 3]), np.ones((3, 2)), height=5)
>>> g.to_dense(np)[3].tolist(), g.merged(np).rows.tolist()
([2.0, 2.0], [1, 3])
"""
from __future__ import annotations

import numpy as np

__all__ = ["SelectedRows", "add_rows", "dense_of", "is_selected_rows"]


class SelectedRows:
    """Rows `rows` of a `height`-row table, with values `value` (numpy or cupy arrays)."""

    __slots__ = ("rows", "value", "height", "is_merged")

    def __init__(self, rows, value, height: int, is_merged: bool = False):
        """is_merged: each row once, in increasing order (what merged() gives), so merging
        again is skipped: a clipped gradient is merged once for its clip and its update."""
        self.rows, self.value, self.height = rows, value, int(height)
        self.is_merged = bool(is_merged)

    @property
    def dtype(self):
        return self.value.dtype

    @property
    def shape(self) -> tuple:
        """The shape of the dense table it stands for."""
        return (self.height,) + tuple(self.value.shape[1:])

    def to_dense(self, xp):
        """The dense [height, ...] table: each row the sum of its values."""
        out = xp.zeros(self.shape, dtype=self.value.dtype)
        add_rows(xp, out, self.rows, self.value)
        return out

    def merged(self, xp) -> SelectedRows:
        """The same gradient with each row once, in increasing order (fluid's MergeAdd): a
        sort of the batch's ids, O(rows log rows), nothing of the table's size."""
        if self.is_merged:
            return self
        rows, value = merge_rows(xp, self.rows, self.value)
        return SelectedRows(rows, value, self.height, is_merged=True)

    def scaled(self, factor) -> SelectedRows:
        return SelectedRows(self.rows, self.value * factor, self.height, self.is_merged)

    # fluid's core.SelectedRows methods
    def get_rows(self) -> list[int]:
        return [int(r) for r in np.asarray(_host(self.rows))]

    def __repr__(self):
        return (f"SelectedRows(height={self.height}, rows={len(self.rows)}, "
                f"value shape={list(self.value.shape)})")


def merge_rows(xp, rows, values):
    """(each row once, increasing; the sum of its values): a stable sort of the batch's ids
    and one add.reduceat over the repeats, many times faster than an unbuffered add.at; ids
    that do not repeat skip the reduceat (a one-row segment sums to itself, bit for bit)."""
    rows = rows.reshape(-1)
    n = rows.size
    if n == 0:
        return rows, values
    order = xp.argsort(rows, kind="stable")
    ordered = rows[order]
    first = xp.empty(n, dtype=bool)  # where each run of one id begins
    first[0] = True
    xp.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = xp.flatnonzero(first)
    if starts.size == n:
        return ordered, values[order]
    return ordered[starts], xp.add.reduceat(values[order], starts, axis=0)


def add_rows(xp, out, rows, values) -> None:
    """out[rows] += values, adding every repeated row."""
    if xp is np:
        unique, summed = merge_rows(xp, rows, values)
        out[unique] += summed  # each row once: a plain fancy-index update is exact
    else:  # cupy's scatter_add adds repeats atomically
        import cupyx

        cupyx.scatter_add(out, rows, values)


def is_selected_rows(value) -> bool:
    return isinstance(value, SelectedRows)


def _host(a):
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a


def dense_of(value):
    """`value`, or the dense table a SelectedRows stands for (how a fetch hands it out)."""
    if not isinstance(value, SelectedRows):
        return value
    if isinstance(value.value, np.ndarray):
        return value.to_dense(np)
    import cupy

    return value.to_dense(cupy)
