"""How a pserver runs its optimize blocks: each as a one-block program of its own, planned
once, run against the pserver's values through a Scope, so a step costs its rows.

A sub-block's plan never lends an update the buffer of its input (its values are its
caller's: executor/inplace.py), so run as a sub-block, a pserver's sgd or lazy Adam on a
sparse gradient would write the slice of the table it holds, and its moments, into copies:
a table's bytes a step for a handful of rows. Run as the global block of a program of its
own, the plan reads the pserver's values from a Scope that holds them and nothing else, and
lends each update its Param / Moment buffers when nothing else refers to them (the pserver
hands out copies of what trainers fetch and the rows they prefetch), so the update writes
the looked-up rows in place, as fluid 1.8's pserver does.

>>> # runner = BlockRunner(pserver_program, block_index, values, place, rng)
>>> # runner.run(xp)   # values updated in place where the plan lent the buffers
"""
from __future__ import annotations

from ..core.program import Program
from ..core.scope import Scope
from ..executor.plan import Plan

__all__ = ["BlockRunner", "ValuesScope", "block_program"]


class ValuesScope(Scope):
    """A Scope over the dict `values` itself (not a copy): what a plan reads from it and
    writes back to it are the pserver's values."""

    def __init__(self, values: dict):
        super().__init__()
        self._arrays = values


def block_program(program, block_index: int, keep=(), ops=None) -> Program:
    """The ops of block `block_index` of `program` (or `ops` of it) as the global block of a
    new program, every variable they use declared as `program` declares it (persistable or
    not), except those in `keep`: persistable, so a run leaves their values in the scope."""
    src = program.block(block_index)
    out = Program()
    out.random_seed = program.random_seed
    g = out.global_block()
    for op in src.ops if ops is None else ops:
        if "sub_block" in op.attrs:
            raise ValueError(f"pserver block {block_index}: op '{op.type}' runs a sub-block")
        for names in list(op.inputs.values()) + list(op.outputs.values()):
            for n in names:
                if not g.has_var(n):
                    v = src._var_recursive(n)
                    g.create_var(name=n, shape=v.shape, dtype=v.dtype,
                                 persistable=v.persistable or n in keep,
                                 lod_level=v.lod_level, type=v.type)
        g.append_op(op.type, {k: list(v) for k, v in op.inputs.items()},
                    {k: list(v) for k, v in op.outputs.items()}, dict(op.attrs), role=op.role)
    return out


class BlockRunner:
    """Block `block_index` of a pserver program (or `ops` of it), run on `values` (name ->
    array) in place; what it writes to a name in `keep` stays in `values`."""

    def __init__(self, program, block_index: int, values: dict, place, rng, keep=(),
                 ops=None):
        self.block_index = block_index
        self.program = block_program(program, block_index, keep, ops)
        self.plan = Plan(self.program, [], [], rng, place=place)
        self.scope = ValuesScope(values)
        self.place = place

    def run(self, xp) -> None:
        self.plan.run(self.scope, {}, xp, self.place)

    def memory_report(self):
        """The plan's report: how many buffers it lent its updates (in place)."""
        return self.plan.memory_report()
