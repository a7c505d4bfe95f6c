"""fluid.dataloader: Dataset (map-style, for fluid.io.DataLoader's dataset form) and
BatchSampler, fluid 1.8's paddle.io precursors."""
from . import batch_sampler, dataloader_iter, dataset  # noqa: F401 - fluid's submodules
from .batch_sampler import BatchSampler
from .dataset import Dataset

__all__ = ["BatchSampler", "Dataset"]
