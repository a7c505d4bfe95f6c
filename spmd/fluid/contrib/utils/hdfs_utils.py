"""fluid.contrib.utils.hdfs_utils: fluid 1.8's HDFS client wrappers and the distributed lookup
table's program helpers. The names spmd lacks are listed with the reason in
docs/fluid_coverage.md.
"""
from ..._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "HDFSClient", "multi_download", "multi_upload"])
