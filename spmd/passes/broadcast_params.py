"""The program that makes every rank start from rank 0's values: one c_broadcast per persistable
variable the main program reads, and every optimizer state variable, in sorted name order (the
same order on every rank). As fluid 1.8's ParallelExecutor, which broadcasts every persistable
variable: a checkpoint loaded on rank 0 alone (parameters and state) reaches every rank.

Reduce mode runs it before the state is split, so `state` names the whole state variables of
the program before the data-parallel rewrite."""
from __future__ import annotations

from ..core.operator import OpRole
from ..core.program import Program


def broadcast_program(program, state, has_value=None) -> Program:
    """`has_value(name)`: whether the scope holds a value for it; a persistable without one (a
    persistable data variable fed each step, as a learning rate) is not broadcast, as fluid's
    BCastParamsToDevices skips a variable not initialized in the first place's scope."""
    block = program.global_block()
    split = {n for names in program.optimizer_state.values() for n in names} - set(state)
    used = {n for op in block.ops for n in op.input_arg_names}
    names = sorted(n for n, v in block.vars.items()
                   if v.persistable and (n in used or n in state) and n not in split
                   and all(d >= 0 for d in v.shape)
                   and (has_value is None or has_value(n)))
    bcast = Program()
    out = bcast.global_block()
    for n in names:
        v = block.vars[n]
        out.create_var(name=n, shape=v.shape, dtype=v.dtype, persistable=True)
        out.append_op("c_broadcast", {"X": [n]}, {"Out": [n]}, {"root": 0},
                      role=OpRole.COMMUNICATE)
    return bcast
