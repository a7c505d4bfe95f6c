"""Op definitions: loss ops."""
from __future__ import annotations
