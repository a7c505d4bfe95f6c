"""fluid.graphviz: a small Graphviz (DOT) writer: Graph with nodes, edges and rank groups,
and GraphPreviewGenerator, the styled graph of parameters, arguments and ops that
fluid.debugger.draw_block_graphviz draws. compile() writes the DOT file and, where Graphviz's
`dot` is installed, renders it to PDF.

>>> g = Graph("net", rankdir="TB")
>>> a, b = g.node("a", prefix="arg"), g.node("b", prefix="arg")
>>> _ = g.edge(a, b, color="red")
>>> print(g.code().splitlines()[0]), "->" in g.code()
digraph G {
(None, True)
"""
from __future__ import annotations

import itertools
import logging
import os
import shutil
import subprocess

__all__ = ["Edge", "Graph", "GraphPreviewGenerator", "Node", "Rank", "crepr"]


def crepr(v) -> str:
    """A DOT value: strings quoted."""
    return f'"{v}"' if isinstance(v, str) else str(v)


def _attrs(attrs: dict) -> str:
    return ",".join(f"{k}={crepr(v)}" for k, v in attrs.items())


class Rank:
    """A rank group (`{rank=same; a,b}`) of nodes drawn on one level."""

    def __init__(self, kind: str, name: str, priority: int):
        self.kind, self.name, self.priority = kind, name, priority
        self.nodes: list[Node] = []

    def __str__(self):
        if not self.nodes:
            return ""
        return "{" + f"rank={self.kind};" + ",".join(n.name for n in self.nodes) + "}"


class Node:
    _ids = itertools.count(1)

    def __init__(self, label, prefix: str, description: str = "", **attrs):
        self.label, self.description, self.attrs = label, description, attrs
        self.name = f"{prefix}_{next(Node._ids)}"

    def __str__(self):
        extra = "," + _attrs(self.attrs) if self.attrs else ""
        return f"{self.name} [label={self.label} {extra} ];"


class Edge:
    def __init__(self, source: Node, target: Node, **attrs):
        self.source, self.target, self.attrs = source, target, attrs

    def __str__(self):
        extra = f"[{_attrs(self.attrs)}]" if self.attrs else ""
        return f"{self.source.name} -> {self.target.name} {extra}"


class Graph:
    """A directed graph: node(), edge(), rank_group(); code() is its DOT text."""

    _rank_ids = itertools.count()

    def __init__(self, title: str, **attrs):
        self.title, self.attrs = title, attrs
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []
        self.rank_groups: dict[str, Rank] = {}

    def rank_group(self, kind: str, priority: int) -> str:
        name = f"rankgroup-{next(Graph._rank_ids)}"
        self.rank_groups[name] = Rank(kind, name, priority)
        return name

    def node(self, label, prefix: str, description: str = "", **attrs) -> Node:
        rank = attrs.pop("rank", None)
        node = Node(label, prefix, description, **attrs)
        if rank is not None:
            self.rank_groups[rank].nodes.append(node)
        self.nodes.append(node)
        return node

    def edge(self, source: Node, target: Node, **attrs) -> Edge:
        edge = Edge(source, target, **attrs)
        self.edges.append(edge)
        return edge

    def code(self) -> str:
        return str(self)

    def __str__(self):
        ranks = sorted(self.rank_groups.values(), key=lambda r: r.priority)
        lines = ["digraph G {", f"title = {crepr(self.title)}"]
        lines += [f"{k}={crepr(v)};" for k, v in self.attrs.items()]
        lines.append("\n".join(str(r) for r in ranks) + "\n")
        lines += [str(n) for n in self.nodes] + [str(e) for e in self.edges] + ["}"]
        return "\n".join(lines)

    def compile(self, dot_path: str) -> str:
        """Write the DOT file; render `<dot_path minus .dot>.pdf` where `dot` is installed.
        Returns the PDF's path."""
        with open(dot_path, "w") as f:
            f.write(str(self))
        image_path = os.path.splitext(dot_path)[0] + ".pdf"
        if shutil.which("dot"):
            subprocess.run(["dot", "-Tpdf", dot_path, "-o", image_path], check=False,
                           capture_output=True)
            logging.warning("write block debug graph to %s", image_path)
        else:
            logging.warning("wrote %s; Graphviz's dot is not installed, so no PDF", dot_path)
        return image_path

    def show(self, dot_path: str) -> None:
        image = self.compile(dot_path)
        if shutil.which("xdg-open"):
            subprocess.Popen(["xdg-open", image], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)


class GraphPreviewGenerator:
    """The styled graph fluid draws a block as: parameters, arguments, ops and edges."""

    def __init__(self, title: str):
        self.graph = Graph(title, layout="dot", concentrate="true", rankdir="TB")
        self.op_rank = self.graph.rank_group("same", 2)
        self.param_rank = self.graph.rank_group("same", 1)
        self.arg_rank = self.graph.rank_group("same", 0)

    def __call__(self, path: str = "temp.dot", show: bool = False):
        return self.graph.show(path) if show else self.graph.compile(path)

    def add_param(self, name: str, data_type, highlight: bool = False) -> Node:
        label = (f'<<table cellpadding="5"><tr><td bgcolor="#2b787e"><b>{name}</b></td></tr>'
                 f"<tr><td>{data_type}</td></tr></table>>")
        return self.graph.node(label, prefix="param", description=name, shape="none",
                               style="rounded,filled,bold", width="1.3",
                               color="orange" if highlight else "#148b97",
                               fontcolor="#ffffff", fontname="Arial")

    def add_op(self, opType: str, highlight: bool = False, **kwargs) -> Node:  # noqa: N803
        return self.graph.node(f"<<B>{opType}</B>>", prefix="op", description=opType,
                               shape="box", style="rounded, filled, bold",
                               color="orange" if highlight else "#303A3A", fontname="Arial",
                               fontcolor="#ffffff", width="1.3", height="0.84")

    def add_arg(self, name: str, highlight: bool = False) -> Node:
        return self.graph.node(crepr(name), prefix="arg", description=name, shape="box",
                               style="rounded,filled,bold", fontname="Arial",
                               fontcolor="#999999", color="orange" if highlight else "#dddddd")

    def add_edge(self, source: Node, target: Node, highlight: bool = False, **kwargs) -> Edge:
        return self.graph.edge(source, target, color="orange" if highlight else "#000000",
                               **kwargs)
