"""fluid.incubate.fleet.utils.fleet_barrier_util: check_all_trainers_ready, a barrier through
files on HDFS (the hadoop client); docs/fluid_coverage.md says why spmd lacks it.
"""
from ...._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "check_all_trainers_ready"])
