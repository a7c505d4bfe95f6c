"""fluid.incubate.fleet.utils.utils: fluid 1.8's program inspection helpers of fleet
(save/load/parse programs as protobuf, check saved variables). docs/fluid_coverage.md lists
what spmd lacks.
"""
from ...._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "check_pruned_program_vars", "check_saved_vars_try_dump", "graphviz", "load_program",
    "parse_program", "program_type_trans", "save_program"])
