"""fluid.net_drawer: draw_graph(startup_program, main_program), the ops of both programs'
first blocks as a Graphviz graph, each op linked to the ops (or "Feed") that made its inputs.
(fluid 1.8.5's own copy passes arguments its Graph does not take and fails; this one runs.)

>>> import spmd.fluid as fluid
>>> main, startup = fluid.Program(), fluid.Program()
>>> with fluid.program_guard(main, startup):
...     x = fluid.data("x", [None, 2], "float32")
...     y = fluid.layers.fc(x, 2)
>>> g = draw_graph(startup, main)
>>> "mul_" in g.code()
True
"""
from __future__ import annotations

import itertools

from .graphviz import Graph, crepr

__all__ = ["draw_edge", "draw_graph", "draw_node", "parse_graph", "unique_id"]

OP_STYLE = {"shape": "oval", "color": "#0F9D58", "style": "filled", "fontcolor": "#FFFFFF"}
VAR_STYLE: dict = {}
GRAPH_STYLE = {"rankdir": "TB"}
_GRAPH_IDS = itertools.count(1)


def unique_id():
    """A function returning the next graph id."""
    return lambda: next(_GRAPH_IDS)


def draw_node(op_type: str) -> dict:
    return {"label": op_type, **OP_STYLE}


def draw_edge(var_parent: dict, slot: str, arg: str) -> dict:
    return {"label": f"{slot}({arg})", **VAR_STYLE, "tail": var_parent[arg]}


def parse_graph(program, graph: Graph, var_dict: dict, **kwargs) -> None:
    """Add the first block's ops of `program` to `graph`; `var_dict` maps a variable to the
    node that made it (known variables start as "Feed")."""
    if "Feed" not in var_dict:
        var_dict["Feed"] = graph.node(crepr("Feed"), prefix="feed", **OP_STYLE)
    feed = var_dict["Feed"]
    for name in program.global_block().vars:
        var_dict.setdefault(name, feed)
    for op in program.global_block().ops:
        style = draw_node(op.type)
        node = graph.node(crepr(style.pop("label")), prefix=op.type, **style)
        for slot in op.input_names:
            for arg in op.input(slot):
                if arg in var_dict:
                    edge = draw_edge(var_dict, slot, arg)
                    graph.edge(edge.pop("tail"), node, **edge)
        for arg in op.output_arg_names:
            var_dict[arg] = node


def draw_graph(startup_program, main_program, **kwargs) -> Graph:
    """The graph of both programs; written to `filename` (a .dot file) when given."""
    GRAPH_STYLE.update(kwargs.get("graph_attr", {}))
    OP_STYLE.update(kwargs.get("node_attr", {}))
    VAR_STYLE.update(kwargs.get("edge_attr", {}))
    graph = Graph(f"graph_{unique_id()()}", **GRAPH_STYLE)
    var_dict: dict = {}
    parse_graph(startup_program, graph, var_dict)
    parse_graph(main_program, graph, var_dict)
    if kwargs.get("filename"):
        with open(kwargs["filename"], "w") as f:
            f.write(graph.code())
    return graph
