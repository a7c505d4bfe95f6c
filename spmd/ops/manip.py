"""Op definitions: manip ops."""
from __future__ import annotations
