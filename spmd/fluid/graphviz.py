"""fluid.graphviz: fluid 1.8's Graphviz writer for IR graphs. docs/fluid_coverage.md lists what
spmd lacks.
"""
from ._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "Edge", "Graph", "GraphPreviewGenerator", "Node", "Rank", "crepr"])
