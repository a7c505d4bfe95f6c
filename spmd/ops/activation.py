"""Op definitions: activation ops."""
from __future__ import annotations
