"""fluid.contrib.slim.graph: GraphWrapper, VarWrapper, OpWrapper (graph_wrapper) and
SlimGraphExecutor (executor)."""
from . import executor, graph_wrapper  # noqa: F401 - fluid's submodules
from .executor import SlimGraphExecutor
from .graph_wrapper import GraphWrapper, OpWrapper, VarWrapper

__all__ = ["SlimGraphExecutor", "GraphWrapper", "VarWrapper", "OpWrapper"]
