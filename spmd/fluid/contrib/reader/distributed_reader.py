"""fluid.contrib.reader.distributed_batch_reader: each trainer keeps every N-th batch (N the
number of trainers), trainer i the (i+1)-th of each group of N, as fluid 1.8 deals batches; an
incomplete last group is dropped, so every trainer runs the same number of steps.

>>> def batches():
...     yield from ([i] for i in range(5))
>>> list(distributed_batch_reader(batches)())       # one trainer: every batch
[[0], [1], [2], [3], [4]]
"""
from __future__ import annotations

from ....comm.topology import detect

__all__ = ["distributed_batch_reader"]


def distributed_batch_reader(batch_reader):
    """A batch reader yielding this trainer's share of `batch_reader`'s batches."""
    topology = detect()
    trainer_id, trainers = topology.rank, topology.size

    def reader():
        group = []
        for batch in batch_reader():
            group.append(batch)
            if len(group) == trainers:
                yield group[trainer_id]
                group = []

    return reader
