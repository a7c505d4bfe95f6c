"""fluid 1.8's Dataset machinery (`fluid.DatasetFactory`, `InMemoryDataset`, `QueueDataset`):
MultiSlot text records read from files through a pipe command, batched into feeds.

The layers, one module each: `slots` (what set_use_var declares), `parse` (one text line to one
record, errors naming file and line), `chunks` (many lines at once, numpy converting each slot's
values), `table` (records held column by column; shuffles and batches as array operations),
`source` (a file through its pipe command, a subprocess per file as fluid runs it), `shuffle`
(global shuffle over MPI), `datasets` (the user-facing classes, re-exported by
`spmd.fluid.dataset`), `loader` (DataLoader.from_dataset). Running a program over a dataset is
`spmd.executor.dataset_run`.
"""
from __future__ import annotations

from .datasets import (
    DatasetBase,
    DatasetFactory,
    FileInstantDataset,
    InMemoryDataset,
    QueueDataset,
)
from .parse import RecordError

__all__ = ["DatasetBase", "DatasetFactory", "FileInstantDataset", "InMemoryDataset",
           "QueueDataset", "RecordError"]
