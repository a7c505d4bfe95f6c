"""fluid.reader: DataLoader and PyReader (spmd/reader/loader.py)."""
from __future__ import annotations

from ..reader.loader import DataLoader, PyReader

__all__ = ["DataLoader", "PyReader"]
