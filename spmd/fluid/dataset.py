"""fluid.dataset: DatasetFactory, InMemoryDataset, QueueDataset (spmd.datafeed implements
them; see there and docs/dataset_api.md).

>>> import spmd.fluid as fluid
>>> fluid.DatasetFactory().create_dataset().__class__.__name__
'QueueDataset'
"""
from __future__ import annotations

from ..datafeed.datasets import (
    DatasetBase,
    DatasetFactory,
    FileInstantDataset,
    InMemoryDataset,
    QueueDataset,
)
from ..errors import PreconditionError

__all__ = ["DatasetFactory", "InMemoryDataset", "QueueDataset"]
_EXTRA = (DatasetBase, FileInstantDataset)  # fluid's module has them beside __all__


class BoxPSDataset(InMemoryDataset):
    """fluid's dataset for Baidu's BoxPS (a GPU parameter-server library): not provided."""

    def __init__(self):
        raise PreconditionError(
            "BoxPSDataset needs Baidu's BoxPS library, which neither spmd nor fluid's public "
            "wheels have; use InMemoryDataset (global_shuffle(fleet) shuffles across trainers)")
