"""fluid.incubate.fleet.utils.fleet_util: FleetUtil, PaddleRec's HDFS/AFS model and metric helpers
for pslib jobs; docs/fluid_coverage.md says why spmd lacks it.
"""
from ...._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "FleetUtil"])
