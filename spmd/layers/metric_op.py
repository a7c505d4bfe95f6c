"""fluid.layers: metric_op builders (filled in by issue 8)."""
from __future__ import annotations

__all__: list[str] = []
