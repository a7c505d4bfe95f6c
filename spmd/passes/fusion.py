"""What the fusion passes (fuse_elewise_add_act.py, fuse_bn_act.py, fuse_optimizer.py) share:
who reads and writes each variable of the global block, whether an op may run later (at the
place of another op) without changing what any op sees, and the rewrite that removes fused
ops and puts their replacements in place."""
from __future__ import annotations

from collections import defaultdict

from ..core.operator import Operator


class DataFlow:
    """The readers and writers (op indices) of every variable of a program's global block;
    variables any other block reads or writes are `elsewhere` (a fusion leaves them alone).

    >>> from spmd.core import Program
    >>> DataFlow(Program()).readers["x"]
    []
    """

    def __init__(self, program):
        self.block = block = program.global_block()
        self.readers: dict[str, list[int]] = defaultdict(list)
        self.writers: dict[str, list[int]] = defaultdict(list)
        self.reads = [frozenset(op.input_arg_names) for op in block.ops]
        self.writes = [frozenset(op.output_arg_names) for op in block.ops]
        for i in range(len(block.ops)):
            for n in self.reads[i]:
                self.readers[n].append(i)
            for n in self.writes[i]:
                self.writers[n].append(i)
        self.elsewhere = {n for b in program.blocks[1:] for op in b.ops
                          for n in op.input_arg_names + op.output_arg_names}
        # an op running a sub-block may touch what the block does: nothing moves across it
        self.barriers = {i for i, op in enumerate(block.ops)
                         if any("block" in k for k in op.attrs)}

    def op(self, i: int) -> Operator:
        return self.block.ops[i]

    def only_writer(self, name: str) -> int | None:
        """The index of the one op writing `name`, if exactly one does (and no sub-block)."""
        w = self.writers.get(name, [])
        return w[0] if len(w) == 1 and name not in self.elsewhere else None

    def read_only_by(self, name: str, allowed) -> bool:
        """Whether every reader of `name` is among `allowed` (and no other block reads it)."""
        return name not in self.elsewhere and set(self.readers.get(name, [])) <= set(allowed)

    def can_sink(self, i: int, j: int, skip=()) -> bool:
        """Whether op i may run at the place of op j > i instead: no op between them (but
        those in `skip`) reads or writes what i writes, or writes what i reads."""
        touched = self.writes[i]
        for k in range(i + 1, j):
            if k in skip:
                continue
            if k in self.barriers:
                return False
            if self.writes[k] & (touched | self.reads[i]) or self.reads[k] & touched:
                return False
        return True


def rewrite(block, removed: set[int], placed: dict[int, Operator]) -> None:
    """block.ops without the ops at `removed`, with placed[i] at the place of op i."""
    ops = []
    for i, op in enumerate(block.ops):
        if i in placed:
            ops.append(placed[i])
        elif i not in removed:
            ops.append(op)
    block.ops = ops
    block.program._bump()


def lod_free(block, names) -> bool:
    """Whether none of `names` carries LoD (a fused op then needs no LoD rule of its own)."""
    for n in names:
        var = block._find_var_recursive(n)
        if var is None or var.lod_level:
            return False
    return True


def drop_unused(program, names) -> None:
    """Forget the variables of `names` no op reads or writes any more (a fused pair's
    intermediate value and its gradient): the compiled program no longer has them."""
    block = program.global_block()
    left = {n for b in program.blocks for op in b.ops
            for n in op.input_arg_names + op.output_arg_names}
    removed = set()
    for n in names:
        var = block.vars.get(n) if n else None
        if var is not None and not var.persistable and n not in left:
            del block.vars[n]
            removed.add(n)
    program.grad_var_map = {f: g for f, g in program.grad_var_map.items()
                            if g not in removed}
