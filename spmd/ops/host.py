"""Op definitions: host ops."""
from __future__ import annotations
