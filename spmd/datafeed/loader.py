"""fluid.io.DataLoader.from_dataset: an iterable over a Dataset's batches, one reader thread
per place; each step gives one feed dict (name -> LoDTensor) per place that still has a batch,
and ends when none has (fluid 1.8's IterableDatasetWrapper). drop_last drops the batches
shorter than the batch size.
"""
from __future__ import annotations

import warnings

from ..core.lod import LoDTensor
from ..errors import InvalidArgumentError, PreconditionError
from .datasets import DatasetBase


class DatasetLoader:
    """What DataLoader.from_dataset returns (see the module docstring)."""

    def __init__(self, dataset, places, drop_last: bool = True):
        if not isinstance(dataset, DatasetBase):
            raise InvalidArgumentError(
                f"DataLoader.from_dataset: dataset must be made by fluid.DatasetFactory(), got "
                f"{type(dataset).__name__}")
        places = list(places) if isinstance(places, (list, tuple)) else [places]
        if not places:
            raise InvalidArgumentError("DataLoader.from_dataset: places is an empty list")
        if len(dataset.filelist) < len(places):
            raise PreconditionError(
                f"DataLoader.from_dataset: Filelist number of dataset {len(dataset.filelist)} "
                f"must be not less than place number {len(places)} (one reader per place)")
        if dataset.thread_num not in (0, len(places)):
            warnings.warn(f"thread_num {dataset.thread_num} which is set in Dataset is "
                          f"ignored: one reader per place ({len(places)})", stacklevel=3)
        dataset.set_thread(len(places))
        self._dataset, self._places, self._drop_last = dataset, places, bool(drop_last)
        self._streams = None

    def __call__(self):
        return self

    def __iter__(self):
        self._streams = self._dataset.thread_batches(len(self._places), self._drop_last)
        return self

    def __next__(self):
        if self._streams is None:
            raise StopIteration
        feeds = []
        for stream in self._streams:
            item = next(stream, None)
            if item is not None:
                feeds.append({name: value if isinstance(value, LoDTensor) else LoDTensor(value)
                              for name, value in item[1].items()})
        if not feeds:
            self._streams = None
            raise StopIteration
        return feeds

    next = __next__
