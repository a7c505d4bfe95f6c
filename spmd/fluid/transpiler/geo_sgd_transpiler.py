"""fluid.transpiler.geo_sgd_transpiler: GeoSgdTranspiler, the DistributeTranspiler in Geo-SGD
mode (trainers push parameter deltas every geo_sgd_need_push_nums steps; spmd/ps/geo.py).

>>> t = GeoSgdTranspiler()
>>> t.config.geo_sgd_mode, t.config.sync_mode
(True, False)
"""
from __future__ import annotations

from ...ps.transpiler import DistributeTranspiler, DistributeTranspilerConfig

__all__ = ["GeoSgdTranspiler"]


class GeoSgdTranspiler(DistributeTranspiler):
    """fluid 1.8's Geo-SGD transpiler: a DistributeTranspiler whose config is in geo mode."""

    def __init__(self, config: DistributeTranspilerConfig | None = None):
        config = config or DistributeTranspilerConfig()
        config.geo_sgd_mode, config.sync_mode = True, False
        super().__init__(config)
