"""Op definitions: linalg ops."""
from __future__ import annotations
