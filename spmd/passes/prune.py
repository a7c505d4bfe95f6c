"""Prune a program to the ops that compute given targets from given feeds (inference export)."""
from __future__ import annotations

from ..core.program import Program
from ..errors import InvalidArgumentError


def prune(program: Program, feeds: list[str], targets: list[str]) -> Program:
    """Keep only the ops that compute `targets` from `feeds` and the persistables (in place)."""
    block = program.global_block()
    live, kept = set(targets) - set(feeds), []
    for op in reversed(block.ops):  # backward liveness: an op is kept when it writes a live var
        if any(n in live for n in op.output_arg_names):
            kept.append(op)
            live.difference_update(op.output_arg_names)
            live.update(n for n in op.input_arg_names if n not in feeds)
    missing = sorted(n for n in live if not block.var(n).persistable)
    if missing:
        raise InvalidArgumentError(
            f"computing {targets} needs {missing}, which are neither fed "
            f"nor computed from the feeds {feeds}; add them to feeded_var_names"
        )
    unused = [n for n in feeds if not block.has_var(n)]
    if unused:
        raise InvalidArgumentError(
            f"feeds {unused} are not read when computing "
            f"{targets}; leave them out")
    block.ops = kept[::-1]
    # the sub-blocks' ops (a StaticRNN's step, a cond's branch) name global variables too
    used = {n for b in program.blocks for op in b.ops
            for n in op.input_arg_names + op.output_arg_names}
    block.vars = {n: v for n, v in block.vars.items() if n in used or n in feeds or n in targets}
    for n in feeds:
        block.vars[n].is_data = True  # the loaded program asks for them as feeds
    program._bump()
    return program
