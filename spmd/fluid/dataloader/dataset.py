"""fluid.dataloader.dataset: Dataset, the map-style data set base (define __getitem__ and
__len__).

>>> class Squares(Dataset):
...     def __getitem__(self, i):
...         return i * i
...     def __len__(self):
...         return 4
>>> [Squares()[i] for i in range(len(Squares()))]
[0, 1, 4, 9]
"""
from __future__ import annotations

__all__ = ["Dataset"]


class Dataset:
    """A data set indexed 0..len-1: subclasses define __getitem__(idx) and __len__()."""

    def __getitem__(self, idx):
        raise TypeError(f"'__getitem__' not implement in class {type(self).__name__}: a "
                        f"Dataset subclass defines __getitem__(idx) and __len__()")

    def __len__(self):
        raise TypeError(f"'__len__' not implement in class {type(self).__name__}: a "
                        f"Dataset subclass defines __getitem__(idx) and __len__()")
