"""fluid.contrib.utils.lookup_table_utils: fluid 1.8's HDFS client wrappers and the distributed
lookup table's program helpers. The names spmd lacks are listed with the reason in
docs/fluid_coverage.md.
"""
from ..._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "convert_dist_to_sparse_program", "load_persistables_for_increment",
    "load_persistables_for_inference"])
