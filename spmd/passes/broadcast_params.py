"""The program that makes every rank start from rank 0's values: one c_broadcast per persistable
variable the main program reads, in sorted name order (the same order on every rank).
Optimizer state is left out: it starts as constants everywhere, and in Reduce mode exists only
on each parameter's owner."""
from __future__ import annotations

from ..core.operator import OpRole
from ..core.program import Program


def broadcast_program(program) -> Program:
    block = program.global_block()
    state = {n for names in program.optimizer_state.values() for n in names}
    used = {n for op in block.ops for n in op.input_arg_names}
    names = sorted(n for n, v in block.vars.items()
                   if v.persistable and n in used and n not in state
                   and all(d >= 0 for d in v.shape))
    bcast = Program()
    out = bcast.global_block()
    for n in names:
        v = block.vars[n]
        out.create_var(name=n, shape=v.shape, dtype=v.dtype, persistable=True)
        out.append_op("c_broadcast", {"X": [n]}, {"Out": [n]}, {"root": 0},
                      role=OpRole.COMMUNICATE)
    return bcast
