"""fluid.core.Graph and fluid.core.Node: the graph of a program's global block that
fluid.framework.IrGraph wraps and CompiledProgram accepts (`core.Graph(program.desc)`).

As fluid's ir::Graph, it holds one node per op and one node per version of each variable
its ops name (an op's output is a new version; its inputs are the latest ones), linked
input -> op -> output; plus the graph's attributes (`set`, `get_int`, ...) and the node
factories IrGraph's passes use. `to_program()` writes the graph back as a program (the op
nodes in an order their links allow, fluid's graph_to_program pass), which is what a
CompiledProgram built from a graph runs.

>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main, fluid.Program()):
...     x = fluid.data("x", [2], "float32"); y = fluid.layers.relu(x)
>>> graph = Graph(main.desc)
>>> sorted(n.name() for n in graph.nodes())
['relu', 'relu_0.tmp_0', 'x']
>>> [op.type for op in graph.to_program().global_block().ops]
['relu']
"""
from __future__ import annotations

import enum
import heapq

from ..errors import ArgumentTypeError, InvalidArgumentError, NotFoundError

__all__ = ["Graph", "Node"]


class Node:
    """A node of a Graph: an op (`op()` its desc) or a variable (`var()` its desc, None for a
    control-dependency variable); `inputs` / `outputs` are the linked nodes."""

    class Type(enum.IntEnum):
        Operation = 0
        Variable = 1

    def __init__(self, node_id: int, name: str, kind: Node.Type, desc=None, ctrl=False):
        self._id, self._name, self._kind, self._desc = node_id, name, kind, desc
        self._ctrl = ctrl
        self.inputs: list[Node] = []
        self.outputs: list[Node] = []

    def id(self) -> int:
        return self._id

    def name(self) -> str:
        return self._name

    def node_type(self) -> Node.Type:
        return self._kind

    def is_op(self) -> bool:
        return self._kind is Node.Type.Operation

    def is_var(self) -> bool:
        return self._kind is Node.Type.Variable

    def is_ctrl_var(self) -> bool:
        return self._ctrl

    def op(self):
        if not self.is_op():
            raise InvalidArgumentError(f"node '{self._name}' is a variable: op() is an op "
                                       f"node's")
        return self._desc

    def var(self):
        if not self.is_var():
            raise InvalidArgumentError(f"node '{self._name}' is an op: var() is a variable "
                                       f"node's")
        return self._desc

    def append_input(self, node: Node) -> None:
        self.inputs.append(node)

    def append_output(self, node: Node) -> None:
        self.outputs.append(node)

    def remove_input(self, node) -> None:
        self.inputs = [n for n in self.inputs if n is not node and n.id() != node]

    def remove_output(self, node) -> None:
        self.outputs = [n for n in self.outputs if n is not node and n.id() != node]

    def clear_inputs(self) -> None:
        self.inputs = []

    def clear_outputs(self) -> None:
        self.outputs = []

    def __repr__(self):
        return f"Node({self._id}, {self._name!r}, {self._kind.name})"


def _program_of(desc):
    program = getattr(desc, "_program", desc)
    if not hasattr(program, "global_block"):
        raise ArgumentTypeError(f"core.Graph expects a program's desc (program.desc), got "
                                f"{type(desc).__name__}")
    return program


class Graph:
    """fluid.core.Graph(program_desc): see the module docstring."""

    def __init__(self, program_desc, start_op_index: int = 0, end_op_index: int | None = None):
        from .fluid_compat import OpDescView
        from .op_desc import VarDescHandle

        self._program = _program_of(program_desc)
        self._program._sync_with_cpp()  # ops filled in through block.desc.append_op()
        self._nodes: dict[int, Node] = {}
        self._next_id = 0
        self._attrs: dict = {}
        block = self._program.global_block()
        latest: dict[str, Node] = {}

        def var_node(name):
            var = block._find_var_recursive(name)
            return self._add(name, Node.Type.Variable,
                             VarDescHandle(var) if var is not None else None)

        for op in block.ops[start_op_index:end_op_index]:
            node = self._add(op.type, Node.Type.Operation, OpDescView(op))
            for name in dict.fromkeys(op.input_arg_names):
                if name not in latest:
                    latest[name] = var_node(name)
                _link(latest[name], node)
            for name in dict.fromkeys(op.output_arg_names):
                latest[name] = var_node(name)
                _link(node, latest[name])

    def _add(self, name: str, kind, desc=None, ctrl=False) -> Node:
        node = Node(self._next_id, name, kind, desc, ctrl)
        self._nodes[node.id()] = node
        self._next_id += 1
        return node

    # -- the graph's attributes --------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self._attrs

    def set(self, name: str, value) -> None:
        self._attrs[name] = value

    set_not_owned = set

    def get(self, name: str):
        if name not in self._attrs:
            raise NotFoundError(f"graph attribute '{name}' is not set (set it with "
                                f"graph.set('{name}', value))")
        return self._attrs[name]

    get_int = get_float = get_string = get_marked_nodes = get

    def erase(self, name: str) -> None:
        self.get(name)
        del self._attrs[name]

    # -- nodes -------------------------------------------------------------------------------
    def nodes(self) -> set:
        """The graph's nodes (a new set: removing from it leaves the graph as it is)."""
        return set(self._nodes.values())

    def retrieve_node(self, node_id: int) -> Node:
        if node_id not in self._nodes:
            raise NotFoundError(f"the graph has no node of id {node_id}")
        return self._nodes[node_id]

    def create_var_node(self, var_desc) -> Node:
        return self._add(var_desc.name(), Node.Type.Variable, var_desc)

    def create_op_node(self, op_desc) -> Node:
        return self._add(op_desc.type(), Node.Type.Operation, op_desc)

    def create_control_dep_var(self) -> Node:
        return self._add(f"__control_var@{len(self._nodes)}", Node.Type.Variable, ctrl=True)

    def create_empty_node(self, name: str, kind) -> Node:
        return self._add(name, Node.Type(int(kind)))

    def remove_node(self, node) -> Node:
        """Take `node` (or its id) out of the graph and out of its neighbours' links."""
        node = self.retrieve_node(node if isinstance(node, int) else node.id())
        del self._nodes[node.id()]
        for other in self._nodes.values():
            other.remove_input(node)
            other.remove_output(node)
        return node

    def release_nodes(self) -> list:
        """Every node, handed out; the graph is left empty."""
        nodes = list(self._nodes.values())
        self._nodes.clear()
        return nodes

    def origin_program_desc(self):
        return self._program.desc

    def clone(self) -> Graph:
        """A graph of the program this one writes back to (its nodes made afresh)."""
        return Graph(self.to_program().desc)

    # -- back to a program -------------------------------------------------------------------
    def to_program(self):
        """A copy of the graph's program whose global block holds the graph's op nodes' ops,
        in an order their links allow (ties in node order: an unchanged graph gives the
        program's own order). An op node made from a description is appended as an op."""
        ops = {n.id(): n for n in self._nodes.values() if n.is_op()}
        waits = {i: {p.id() for v in n.inputs for p in v.inputs if p.id() in ops and p is not n}
                 for i, n in ops.items()}
        ready = [i for i, w in waits.items() if not w]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(ops[i])
            for j, w in waits.items():
                if i in w:
                    w.discard(i)
                    if not w and j not in order and j not in ready:
                        heapq.heappush(ready, j)
        if len(order) != len(ops):
            raise InvalidArgumentError("core.Graph.to_program: the graph's op nodes form a "
                                       "cycle; no order runs them")
        new = self._program.clone()
        block = new.global_block()
        by_position = {i: op for i, op in enumerate(block.ops)}
        index_of = {id(op): i for i, op in enumerate(self._program.global_block().ops)}
        kept = []
        for node in order:
            desc = node.op()
            op = getattr(desc, "_op", None) or getattr(desc, "op", None)
            if op is not None and id(op) in index_of:
                kept.append(by_position[index_of[id(op)]])
            else:  # a description only: built as an op of the new program
                ins, outs = desc._slots()
                kept.append(block.append_op(desc.type(), ins, outs, dict(desc._attrs)))
        block.ops = kept
        new._bump()
        return new


def _link(src: Node, dst: Node) -> None:
    src.outputs.append(dst)
    dst.inputs.append(src)
