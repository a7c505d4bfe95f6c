"""fluid.dataloader.batch_sampler: BatchSampler, lists of indices of a Dataset (or of given
indices), optionally shuffled, the last short batch kept unless drop_last.

>>> list(BatchSampler(indices=[0, 1, 2, 3, 4], batch_size=2))
[[0, 1], [2, 3], [4]]
>>> len(BatchSampler(indices=list(range(5)), batch_size=2, drop_last=True))
2
"""
from __future__ import annotations

import numpy as np

from ...errors import InvalidArgumentError
from .dataset import Dataset

__all__ = ["BatchSampler"]


class BatchSampler:
    def __init__(self, dataset=None, indices=None, shuffle=False, batch_size=1,
                 drop_last=False):
        if dataset is None:
            if not isinstance(indices, (list, tuple)):
                raise InvalidArgumentError(
                    f"BatchSampler: either dataset or indices (a list or tuple) should be "
                    f"set, got indices of type {type(indices).__name__}")
            self.indices = list(indices)
        else:
            if not isinstance(dataset, Dataset):
                raise InvalidArgumentError("BatchSampler: dataset should be an instance of "
                                           "fluid.dataloader.Dataset")
            if indices is not None:
                raise InvalidArgumentError("BatchSampler: should not set both dataset and "
                                           "indices")
            self.indices = list(range(len(dataset)))
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise InvalidArgumentError(
                f"BatchSampler: batch_size should be a positive integer, got {batch_size}")
        if not isinstance(shuffle, bool) or not isinstance(drop_last, bool):
            raise InvalidArgumentError("BatchSampler: shuffle and drop_last must be bools")
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last

    def __iter__(self):
        if self.shuffle:
            np.random.shuffle(self.indices)
        batch = []
        for idx in self.indices:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        extra = 0 if self.drop_last else self.batch_size - 1
        return (len(self.indices) + extra) // self.batch_size
