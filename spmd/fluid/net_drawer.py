"""fluid.net_drawer: fluid 1.8's program drawer (graphviz Python package). docs/fluid_coverage.md
lists what spmd lacks.
"""
from ._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "draw_edge", "draw_graph", "draw_node", "parse_graph", "unique_id"])
