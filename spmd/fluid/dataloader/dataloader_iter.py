"""fluid.dataloader.dataloader_iter: default_collate_fn (samples of fields -> one stacked
array per field) and ParentWatchDog (whether the process that started this one lives).

>>> import numpy as np
>>> [a.shape for a in default_collate_fn([[np.zeros(3), 1], [np.ones(3), 2]])]
[(2, 3), (2,)]
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["ParentWatchDog", "default_collate_fn"]


def default_collate_fn(batch):
    """A list of samples (each an array, or a list of fields) -> [one array per field]."""
    if isinstance(batch[0], np.ndarray):
        return [np.stack(batch, axis=0)]
    return [np.stack(field, axis=0) for field in zip(*batch)]


class ParentWatchDog:
    """is_alive(): False once the parent process (at construction) has gone."""

    def __init__(self):
        self._parent_pid = os.getppid()
        self._parent_alive = True

    def is_alive(self) -> bool:
        if self._parent_alive:
            self._parent_alive = os.getppid() == self._parent_pid
        return self._parent_alive
