"""fluid.incubate.fleet.utils.hdfs: HDFSClient, a wrapper of the hadoop command line;
docs/fluid_coverage.md says why spmd lacks it.
"""
from ...._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "HDFSClient"])
