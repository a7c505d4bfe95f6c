"""Op definitions: metric ops."""
from __future__ import annotations
