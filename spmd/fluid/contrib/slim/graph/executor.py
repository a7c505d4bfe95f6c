"""fluid.contrib.slim.graph.executor: SlimGraphExecutor, which runs a GraphWrapper on a batch
(a list of samples fed to its in_nodes through a DataFeeder, or a feed dict) and fetches its
out_nodes, in their order."""
from __future__ import annotations

from .... import executor
from ....data_feeder import DataFeeder
from .graph_wrapper import GraphWrapper

__all__ = ["SlimGraphExecutor", "GraphWrapper"]


class SlimGraphExecutor:
    """An Executor on `place` for GraphWrappers (`exe` is the Executor)."""

    def __init__(self, place):
        self.exe = executor.Executor(place)
        self.place = place

    def run(self, graph, scope, data=None):
        """Run `graph` (its compiled_graph when it has one) in `scope` on `data`: a list of
        sample tuples, in the order of graph.in_nodes, or a list whose first item is a feed
        dict. Returns the values of graph.out_nodes."""
        if not isinstance(graph, GraphWrapper):
            raise TypeError(f"SlimGraphExecutor.run runs a GraphWrapper, got "
                            f"{type(graph).__name__}")
        feed = None
        if data is not None and len(data) and isinstance(data[0], dict):
            feed = data[0] if len(data) == 1 else data
        elif data is not None:
            feeder = DataFeeder(feed_list=list(graph.in_nodes.values()), place=self.place,
                                program=graph.program)
            feed = feeder.feed(data)
        program = graph.compiled_graph if graph.compiled_graph else graph.program
        return self.exe.run(program, scope=scope, fetch_list=list(graph.out_nodes.values()),
                            feed=feed)
