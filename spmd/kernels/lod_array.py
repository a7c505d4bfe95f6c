"""Kernels: the LoD tensor-array ops (see spmd/ops/lod_array.py) and the rank table value.

Every op here moves whole rows: each kernel computes which rows of its input make its output
(a row index, from the LoD and the rank table, on the host) and gathers them; its gradient
scatters the output gradient back through the same index. The index is recomputed from the
forward input's LoD in the gradient, so gradients carry no LoD of their own.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError
from .registry import kernel
from .tensor import ints_of


@dataclass(frozen=True)
class LoDRankTable:
    """fluid's LoDRankTable: the sequences of LoD level `level` as (index, length) items,
    longest first (equal lengths keep their order), and the LoD levels above it.

    >>> t = LoDRankTable.from_lod((np.array([0, 2, 5, 6]),), 0)
    >>> t.items()
    [(1, 3), (0, 2), (2, 1)]
    """

    level: int
    indices: tuple
    lengths: tuple
    coarse_lod: tuple = ()

    @staticmethod
    def from_lod(lod, level: int) -> LoDRankTable:
        offsets = np.asarray(lod[level], dtype=np.int64)
        lengths = np.diff(offsets)
        order = np.argsort(-lengths, kind="stable")
        return LoDRankTable(int(level), tuple(int(i) for i in order),
                            tuple(int(n) for n in lengths[order]), tuple(lod[:level]))

    def items(self) -> list:
        """[(index, length), ...] as fluid's LoDRankTable.items()."""
        return list(zip(self.indices, self.lengths))

    def get(self) -> np.ndarray:
        """The items as an int64 [n, 2] host array of (index, length) rows: what fetching a
        rank table gives (the executor copies fetches to the host with .get())."""
        return np.array(self.items(), dtype=np.int64).reshape(-1, 2)

    def __array__(self, dtype=None, copy=None):
        return self.get() if dtype is None else self.get().astype(dtype)

    def running(self, t: int) -> int:
        """How many sequences are longer than `t` (the leading items)."""
        return int(np.sum(np.asarray(self.lengths, dtype=np.int64) > t))

    def __len__(self) -> int:
        return len(self.indices)


def _table(ins, op: str) -> LoDRankTable:
    table = ins["RankTable"]
    if not isinstance(table, LoDRankTable):
        raise InvalidArgumentError(
            f"{op}: RankTable must be a lod_rank_table (fluid.layers.control_flow."
            f"lod_rank_table(x)), got {type(table).__name__}")
    return table


def _lod(ins, op: str, slot: str = "X"):
    lod = ins.get(slot + "@LOD")
    if lod is None:
        raise InvalidArgumentError(
            f"{op}: input {slot} carries no LoD; feed it as a LoDTensor (fluid.create_lod_tensor"
            f"(data, [[len(s) for s in sequences]], place)) to a variable declared with "
            f"lod_level=1, or compute it from one")
    return lod


def sub_lod(lod, begin: int, end: int, level: int):
    """fluid's GetSubLoDAndAbsoluteOffset: the lengths, level by level from `level` down, of
    units [begin, end) of `level`, and their rows [row_begin, row_end)."""
    lengths = []
    for offsets in lod[level:]:
        lengths.append(np.diff(offsets[begin:end + 1]))
        begin, end = int(offsets[begin]), int(offsets[end])
    return lengths, begin, end


def _append(levels: list, lengths: list) -> None:
    for k, part in enumerate(lengths):
        if k == len(levels):
            levels.append([])
        levels[k].append(part)


def _as_lod(levels: list):
    """Per-level lists of lengths to a run-time LoD (offsets), None when there is none."""
    if not levels:
        return None
    out = []
    for parts in levels:
        lengths = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        level = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        level.flags.writeable = False
        out.append(level)
    return tuple(out)


def _ranges(pairs) -> np.ndarray:
    """The row index made of [begin, end) ranges, in order."""
    parts = [np.arange(b, e, dtype=np.int64) for b, e in pairs if e > b]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _check_level(lod, table: LoDRankTable, op: str) -> None:
    if table.level >= len(lod):
        raise InvalidArgumentError(
            f"{op}: the rank table was made at LoD level {table.level}, but X has "
            f"{len(lod)} level(s)")
    units = len(lod[table.level]) - 1
    if units != len(table):
        raise InvalidArgumentError(
            f"{op}: X has {units} sequences at level {table.level} but the rank table has "
            f"{len(table)}; make the table from a LoD tensor with the same sequences")


def split_plan(lod, table: LoDRankTable) -> list:
    """For each time step t: (rows of X making array element t, that element's LoD)."""
    offsets = lod[table.level]
    steps = []
    for t in range(table.lengths[0] if len(table) else 0):
        pairs, levels = [], []
        for index, length in zip(table.indices, table.lengths):
            if t >= length:
                break
            start = int(offsets[index]) + t
            lengths, b, e = sub_lod(lod, start, start + 1, table.level + 1)
            _append(levels, lengths)
            pairs.append((b, e))
        steps.append((_ranges(pairs), _as_lod(levels)))
    return steps


@kernel("lod_rank_table")
def lod_rank_table(xp, ins, attrs, want):
    lod = _lod(ins, "lod_rank_table")
    level = attrs["level"]
    if level >= len(lod):
        raise InvalidArgumentError(
            f"lod_rank_table: level {level} is out of range: X has {len(lod)} LoD level(s)")
    return {"Out": LoDRankTable.from_lod(lod, level)}


@kernel("max_sequence_len")
def max_sequence_len(xp, ins, attrs, want):
    table = _table(ins, "max_sequence_len")
    return {"Out": xp.asarray([table.lengths[0] if len(table) else 0], dtype=np.int64)}


@kernel("lod_tensor_to_array")
def lod_tensor_to_array(xp, ins, attrs, want):
    x, table = ins["X"], _table(ins, "lod_tensor_to_array")
    lod = _lod(ins, "lod_tensor_to_array")
    _check_level(lod, table, "lod_tensor_to_array")
    steps = split_plan(lod, table)
    return {"Out": [x[xp.asarray(rows)] for rows, _ in steps],
            "Out@LOD": [elem for _, elem in steps]}


@kernel("lod_tensor_to_array_grad")
def lod_tensor_to_array_grad(xp, ins, attrs, want):
    x, table = ins["X"], _table(ins, "lod_tensor_to_array_grad")
    dout = ins.get("Out@GRAD") or []
    dx = xp.zeros_like(x)
    for t, (rows, _) in enumerate(split_plan(_lod(ins, "lod_tensor_to_array_grad"), table)):
        if t < len(dout) and dout[t] is not None:
            dx[xp.asarray(rows)] = dout[t]
    return {"X@GRAD": dx}


def _merge_plan(array, elem_lods, table: LoDRankTable, op: str):
    """array_to_lod_tensor's gather: (row index into the array's rows laid end to end, the
    output's LoD, each element's first row there)."""
    if len(table) and table.lengths[0] > len(array):
        raise InvalidArgumentError(
            f"{op}: the longest sequence has {table.lengths[0]} steps but the array has "
            f"{len(array)} elements")
    missing = [t for t, a in enumerate(array) if a is None]
    if missing:
        raise InvalidArgumentError(f"{op}: elements {missing} of the tensor array were "
                                   f"never written")
    base = np.concatenate([[0], np.cumsum([a.shape[0] for a in array])]).astype(np.int64)
    elem_lods = list(elem_lods or [None] * len(array))
    pairs, levels, seq_lengths = [], [], np.zeros(len(table), np.int64)
    for pos in sorted(range(len(table)), key=lambda p: table.indices[p]):
        seq_lengths[table.indices[pos]] = table.lengths[pos]
        for t in range(table.lengths[pos]):
            elem = elem_lods[t] if t < len(elem_lods) else None
            if elem:
                lengths, b, e = sub_lod(elem, pos, pos + 1, 0)
                _append(levels, lengths)
            else:
                b, e = pos, pos + 1
            if e > array[t].shape[0]:
                raise InvalidArgumentError(
                    f"{op}: element {t} has {array[t].shape[0]} rows, but sequence "
                    f"{table.indices[pos]} (rank {pos}) needs rows up to {e}")
            pairs.append((base[t] + b, base[t] + e))
    lod = [np.asarray(lv, dtype=np.int64) for lv in table.coarse_lod]
    lod.append(np.concatenate([[0], np.cumsum(seq_lengths)]).astype(np.int64))
    below = _as_lod(levels) or ()
    for lv in lod:
        lv.flags.writeable = False
    return _ranges(pairs), tuple(lod) + below, base


@kernel("array_to_lod_tensor")
def array_to_lod_tensor(xp, ins, attrs, want):
    array, table = ins["X"], _table(ins, "array_to_lod_tensor")
    if not isinstance(array, list) or not array:
        raise InvalidArgumentError("array_to_lod_tensor: X must be a non-empty tensor array")
    index, lod, _ = _merge_plan(array, ins.get("X@LOD"), table, "array_to_lod_tensor")
    rows = xp.concatenate(array, axis=0)
    return {"Out": rows[xp.asarray(index)], "Out@LOD": lod}


@kernel("array_to_lod_tensor_grad")
def array_to_lod_tensor_grad(xp, ins, attrs, want):
    array, table = ins["X"], _table(ins, "array_to_lod_tensor_grad")
    index, _, base = _merge_plan(array, ins.get("X@LOD"), table, "array_to_lod_tensor_grad")
    dout = ins["Out@GRAD"]
    drows = xp.zeros((int(base[-1]), *dout.shape[1:]), dtype=dout.dtype)
    drows[xp.asarray(index)] = dout
    return {"X@GRAD": [drows[int(base[t]):int(base[t + 1])] for t in range(len(array))]}


def _shrink_rows(x, lod, n: int, op: str):
    """(rows kept, the kept LoD) of memory `x` for `n` running sequences."""
    if lod is None:
        if n > x.shape[0]:
            raise InvalidArgumentError(
                f"{op}: {n} sequences are still running but the memory has only "
                f"{x.shape[0]} rows; a memory holds one row per sequence, in rank order")
        return n, None
    if n > len(lod[0]) - 1:
        raise InvalidArgumentError(
            f"{op}: {n} sequences are still running but X has only {len(lod[0]) - 1}; a "
            f"static input needs as many sequences as the step input")
    lengths, _, end = sub_lod(lod, 0, n, 0)
    return end, _as_lod([[part] for part in lengths])


@kernel("shrink_rnn_memory")
def shrink_rnn_memory(xp, ins, attrs, want):
    x, table = ins["X"], _table(ins, "shrink_memory")
    t = ints_of(ins["I"])[0]
    height, lod = _shrink_rows(x, ins.get("X@LOD"), table.running(t), "shrink_memory")
    return {"Out": x[:height], "Out@LOD": lod}


@kernel("shrink_rnn_memory_grad")
def shrink_rnn_memory_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins.get("Out@GRAD")
    dx = xp.zeros_like(x)
    if dout is not None:
        dx[:dout.shape[0]] = dout
    return {"X@GRAD": dx}


def _reorder_index(x, lod, table: LoDRankTable, op: str):
    """(row index of X in the table's order, the reordered LoD)."""
    units = x.shape[0] if lod is None else len(lod[0]) - 1
    if units != len(table):
        what = "rows (it has no LoD)" if lod is None else "sequences"
        raise InvalidArgumentError(
            f"{op}: X has {units} {what} but the rank table has {len(table)} sequences; "
            f"reorder a tensor with one sequence (or row) per sequence of the table's input")
    if lod is None:
        return np.asarray(table.indices, dtype=np.int64), None
    pairs, levels = [], []
    for index in table.indices:
        lengths, b, e = sub_lod(lod, index, index + 1, 0)
        _append(levels, lengths)
        pairs.append((b, e))
    return _ranges(pairs), _as_lod(levels)


@kernel("reorder_lod_tensor_by_rank")
def reorder_lod_tensor_by_rank(xp, ins, attrs, want):
    x, table = ins["X"], _table(ins, "reorder_lod_tensor_by_rank")
    index, lod = _reorder_index(x, ins.get("X@LOD"), table, "reorder_lod_tensor_by_rank")
    return {"Out": x[xp.asarray(index)], "Out@LOD": lod}


@kernel("reorder_lod_tensor_by_rank_grad")
def reorder_lod_tensor_by_rank_grad(xp, ins, attrs, want):
    x, table = ins["X"], _table(ins, "reorder_lod_tensor_by_rank_grad")
    index, _ = _reorder_index(x, ins.get("X@LOD"), table, "reorder_lod_tensor_by_rank_grad")
    dx = xp.zeros_like(x)
    dx[xp.asarray(index)] = ins["Out@GRAD"]
    return {"X@GRAD": dx}
