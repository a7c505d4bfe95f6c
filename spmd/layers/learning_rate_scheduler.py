"""fluid.layers: learning_rate_scheduler builders (filled in by issue 8)."""
from __future__ import annotations

__all__: list[str] = []
