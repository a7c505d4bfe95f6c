"""BuildStrategy.memory_optimize: shorten the lives of gradients by scheduling each parameter
update as early as its data allows.

fluid appends every update after the whole backward pass, so every gradient is alive at once
when the first update runs: the gradients of all parameters, on top of the parameters and the
optimizer state. The plan frees each value after its last reader (executor/plan.py), so once
an update runs right after the op that finishes its gradient, that gradient dies there, and
at most a few are alive at a time (PyTorch's "optimizer step in the backward hook").

The rewrite moves only the plain elementwise updates (OpDef.movable, each drawing no random
number and touching only its own slots), each up to right after the last earlier op it
depends on: one that writes what it reads or writes, or reads what it writes. It never moves
an update across a collective, a communication op or an op that runs a sub-block, so the
collectives stay in one order on every rank, and a data-parallel program, whose updates wait
for the gradients' all-reduce, keeps its updates where they are. The values computed are
bitwise the same: every op sees the inputs it saw before.
"""
from __future__ import annotations

from ..core.operator import OpRole
from ..ops.registry import get_op_def
from .registry import register_pass


def _barrier(op) -> bool:
    return (op.role is OpRole.COMMUNICATE or "sub_block" in op.attrs
            or get_op_def(op.type).collective)


def hoist_updates(block) -> int:
    """Rewrite `block.ops` so each movable update (OpDef.movable) runs right after the last
    op it depends on (see the module doc); returns how many updates moved."""
    placed: list = []
    moved = 0
    for op in block.ops:
        if op.role is not OpRole.OPTIMIZE or not get_op_def(op.type).movable:
            placed.append(op)
            continue
        reads, writes = set(op.input_arg_names), set(op.output_arg_names)
        at = len(placed)
        while at > 0:
            other = placed[at - 1]
            if (_barrier(other) or writes.intersection(other.input_arg_names)
                    or (reads | writes).intersection(other.output_arg_names)):
                break
            at -= 1
        moved += at < len(placed)
        placed.insert(at, op)
    if moved:
        block.ops = placed
        block.program._bump()
    return moved


# after every data-parallel pass (the collectives and fused updates are in place), before the
# debug output of the finished program
@register_pass("memory_optimize", order=95, fields=("memory_optimize",),
               one_place=True,
               when=lambda ctx: bool(ctx.strategy.memory_optimize) and ctx.training)
def memory_optimize_pass(ctx) -> None:
    """hoist_updates on the program's global block."""
    hoist_updates(ctx.program.global_block())
