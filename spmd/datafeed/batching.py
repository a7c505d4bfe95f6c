"""Records to one feed, as fluid's data feeds fill the fed variables.

A sparse slot's values are laid end to end into a `[total, 1]` tensor with the LoD of the
records' offsets (a LoDTensor); a dense slot's are reshaped to the variable's shape with its -1
inferred (`[-1, 13]` -> `[batch, 13]`). The InMemoryDataset's reading fills a sparse slot left
empty (all zeros dropped) with one 0, as MultiSlotInMemoryDataFeed does.
"""
from __future__ import annotations

import numpy as np

from ..core.lod import LoDTensor


def batch_feed(records, slots, fill_empty: bool) -> dict:
    """The feed (name -> array, or LoDTensor for a sparse slot) of the list `records`."""
    feed = {}
    for i, slot in enumerate(slots):
        parts = [r[i] for r in records]
        if fill_empty and not slot.is_dense:
            zero = np.zeros(1, slot.dtype)
            parts = [p if p.size else zero for p in parts]
        values = np.concatenate(parts) if parts else np.zeros(0, slot.dtype)
        if slot.is_dense:
            feed[slot.name] = values.reshape(slot.batch_shape(values.size))
        else:
            offsets = np.zeros(len(parts) + 1, np.int64)
            np.cumsum([p.size for p in parts], out=offsets[1:])
            feed[slot.name] = LoDTensor(values.reshape(-1, 1), [offsets])
    return feed


def batches(records, batch_size: int, slots, fill_empty: bool, drop_last: bool = False):
    """Yield the feeds of consecutive `batch_size` records of the iterable `records` (the last
    one shorter unless drop_last)."""
    pending = []
    for record in records:
        pending.append(record)
        if len(pending) == batch_size:
            yield len(pending), batch_feed(pending, slots, fill_empty)
            pending = []
    if pending and not drop_last:
        yield len(pending), batch_feed(pending, slots, fill_empty)
