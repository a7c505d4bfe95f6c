"""Op definitions: reader ops."""
from __future__ import annotations
