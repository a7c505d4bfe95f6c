"""fluid.contrib.utils: the HDFS client (hdfs_utils) and the distributed lookup table's
program helpers (lookup_table_utils)."""
from . import hdfs_utils, lookup_table_utils  # noqa: F401 - fluid's submodules
from .hdfs_utils import HDFSClient, multi_download, multi_upload
from .lookup_table_utils import (
    convert_dist_to_sparse_program,
    load_persistables_for_increment,
    load_persistables_for_inference,
)

__all__ = ["HDFSClient", "multi_download", "multi_upload", "convert_dist_to_sparse_program",
           "load_persistables_for_increment", "load_persistables_for_inference"]
