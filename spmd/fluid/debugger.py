"""fluid.debugger: fluid 1.8's program pretty-printer and graph drawer. docs/fluid_coverage.md
lists what spmd lacks.
"""
from ._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "draw_block_graphviz", "pprint_block_codes", "pprint_program_codes",
    "prepare_fast_nan_inf_debug", "repr_attr", "repr_data_type", "repr_lodtensor", "repr_op",
    "repr_selected_rows", "repr_tensor", "repr_tensor_array", "repr_var",
    "run_fast_nan_inf_debug"])
