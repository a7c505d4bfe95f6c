"""fluid.data_feeder: DataFeeder (spmd/reader/feeder.py)."""
from __future__ import annotations

from ..reader.feeder import DataFeeder

__all__ = ["DataFeeder"]
