"""fluid.reader: DataLoader and PyReader (spmd/reader/loader.py), default_collate_fn."""
from __future__ import annotations

from ..reader.collate import default_collate_fn
from ..reader.loader import DataLoader, PyReader

__all__ = ["DataLoader", "PyReader", "default_collate_fn"]
