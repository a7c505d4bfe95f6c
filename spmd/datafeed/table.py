"""Records held column by column: for each slot one array of every record's values laid end to
end and the records' offsets into it (`offsets[i]:offsets[i + 1]` are record i's values).

Loading, shuffling, dealing to trainers and batching are then array operations on whole
columns, not Python work per record: a batch of records a..b is a slice of each column, its
LoD the offsets a..b shifted to 0.
"""
from __future__ import annotations

import numpy as np

from ..core.lod import LoDTensor


def _offsets(counts) -> np.ndarray:
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


class RecordTable:
    """`len(table)` records of `slots`; `columns[i]` is slot i's (values, offsets)."""

    def __init__(self, slots, columns, size: int):
        self.slots = list(slots)
        self.columns = columns
        self.size = int(size)

    def __len__(self) -> int:
        return self.size

    @classmethod
    def empty(cls, slots) -> RecordTable:
        return cls(slots, [(np.zeros(0, s.dtype), np.zeros(1, np.int64)) for s in slots], 0)

    @classmethod
    def from_counts(cls, slots, values, counts) -> RecordTable:
        """A table from each slot's values and per-record counts."""
        size = len(counts[0]) if counts else 0
        return cls(slots, [(v, _offsets(c)) for v, c in zip(values, counts)], size)

    def counts(self, i: int) -> np.ndarray:
        return np.diff(self.columns[i][1])

    @staticmethod
    def concat(tables) -> RecordTable:
        tables = [t for t in tables if len(t)] or list(tables)[:1]
        if len(tables) == 1:
            return tables[0]
        slots = tables[0].slots
        values = [np.concatenate([t.columns[i][0] for t in tables]) for i in range(len(slots))]
        counts = [np.concatenate([t.counts(i) for t in tables]) for i in range(len(slots))]
        return RecordTable.from_counts(slots, values, counts)

    def take(self, index) -> RecordTable:
        """The records at `index` (an int array), in that order."""
        index = np.asarray(index, np.int64)
        values, counts = [], []
        for values_i, offsets in self.columns:
            lengths = np.diff(offsets)[index]
            starts = offsets[:-1][index]
            new = _offsets(lengths)
            gather = np.repeat(starts - new[:-1], lengths) + np.arange(new[-1])
            values.append(values_i[gather])
            counts.append(lengths)
        return RecordTable.from_counts(self.slots, values, counts)

    def slice(self, start: int, stop: int) -> RecordTable:
        columns = []
        for values, offsets in self.columns:
            part = offsets[start:stop + 1]
            columns.append((values[part[0]:part[-1]], part - part[0]))
        return RecordTable(self.slots, columns, stop - start)

    def feed(self) -> dict:
        """The feed of all these records: a dense slot reshaped to its variable's shape, a
        sparse one as a `[total, 1]` LoDTensor with the records' offsets as its LoD."""
        out = {}
        for slot, (values, offsets) in zip(self.slots, self.columns):
            if slot.is_dense:
                out[slot.name] = values.reshape(slot.batch_shape(values.size))
            else:
                out[slot.name] = LoDTensor(values.reshape(-1, 1), [offsets])
        return out


def batches(tables, batch_size: int, drop_last: bool = False):
    """Yield (records, feed) of consecutive `batch_size` records of the tables `tables`
    yields (the last batch shorter unless drop_last)."""
    pending = None
    for table in tables:
        pending = table if pending is None or not len(pending) else RecordTable.concat(
            [pending, table])
        start = 0
        while len(pending) - start >= batch_size:
            yield batch_size, pending.slice(start, start + batch_size).feed()
            start += batch_size
        pending = pending.slice(start, len(pending))
    if pending is not None and len(pending) and not drop_last:
        yield len(pending), pending.feed()
