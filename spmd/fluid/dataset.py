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

__all__ = ["DatasetFactory", "InMemoryDataset", "QueueDataset"]
_EXTRA = (DatasetBase, FileInstantDataset)  # fluid's module has them beside __all__
