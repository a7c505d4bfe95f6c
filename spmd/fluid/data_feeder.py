"""placeholder (issue 8)."""
from __future__ import annotations

__all__: list[str] = []
