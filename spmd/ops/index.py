"""Op definitions: index ops."""
from __future__ import annotations
