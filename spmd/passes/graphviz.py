"""BuildStrategy.debug_graphviz_path: the compiled (data-parallel) program as a Graphviz DOT
file, ops as boxes coloured by role, variables as ellipses (persistables filled), edges from
each op's inputs to it and from it to its outputs. `dot -Tsvg graph.dot > graph.svg` draws
it. It runs as the last registered pass, so the graph is the program every rank runs (a test
program's too).

>>> from spmd.core import Program
>>> print(program_to_dot(Program()).splitlines()[0])
digraph program {
"""
from __future__ import annotations

import json
import os

from ..core.operator import OpRole
from ..errors import InvalidArgumentError
from .pass_builder import graphviz_paths
from .registry import register_pass

__all__ = ["graphviz_pass", "program_to_dot", "write_graphviz"]

_ROLE_COLOURS = {OpRole.FORWARD: "lightblue", OpRole.BACKWARD: "lightpink",
                 OpRole.OPTIMIZE: "palegreen", OpRole.COMMUNICATE: "khaki",
                 OpRole.LOSS: "orange", OpRole.LR_SCHED: "plum", OpRole.AVERAGE: "lightgrey"}


def _quoted(text: str) -> str:
    return json.dumps(text)  # a DOT string: double quotes, backslash escapes


def program_to_dot(program) -> str:
    """The global block of `program` as DOT text."""
    block = program.global_block()
    lines = ["digraph program {", "  rankdir=TB;", "  node [fontsize=10];"]
    used = set()
    for i, op in enumerate(block.ops):
        label = f"#{i} {op.type}" + (f" (rank {op.owner})" if op.owner is not None else "")
        colour = _ROLE_COLOURS.get(op.role, "white")
        lines.append(f"  op{i} [label={_quoted(label)}, shape=box, style=filled, "
                     f"fillcolor={colour}];")
        for name in op.input_arg_names:
            lines.append(f"  {_quoted('var:' + name)} -> op{i};")
            used.add(name)
        for name in op.output_arg_names:
            lines.append(f"  op{i} -> {_quoted('var:' + name)};")
            used.add(name)
    for name in sorted(used):
        var = block.vars.get(name)
        shape = list(var.shape) if var is not None else "?"
        style = ", style=filled, fillcolor=lightyellow" if var is not None and var.persistable \
            else ""
        lines.append(f"  {_quoted('var:' + name)} [label={_quoted(f'{name} {shape}')}, "
                     f"shape=ellipse{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_graphviz(program, path: str) -> None:
    """Write `program` as DOT to `path` (its folder must exist), naming the path on failure."""
    try:
        with open(os.fspath(path), "w") as f:
            f.write(program_to_dot(program))
    except OSError as e:
        raise InvalidArgumentError(
            f"BuildStrategy.debug_graphviz_path={path!r}: cannot write the graph there ({e}); "
            f"give a path in an existing, writable folder") from None


# last: it draws the finished program and changes nothing
@register_pass("graphviz", order=100, fields=("debug_graphviz_path",),
               one_place=True,
               when=lambda ctx: bool(ctx.strategy.debug_graphviz_path
                                     or graphviz_paths(ctx.strategy)))
def graphviz_pass(ctx) -> None:
    """BuildStrategy.debug_graphviz_path set: write_graphviz the compiled program there; and
    to the graph_viz_path of each graph_viz_pass of the strategy's PassBuilder
    (_finalize_strategy_and_create_passes, then append_pass("graph_viz_pass").set(...))."""
    for path in [ctx.strategy.debug_graphviz_path, *graphviz_paths(ctx.strategy)]:
        if path:
            write_graphviz(ctx.program, path)
