"""What a plan's ops read and write, worked out once when the plan compiles: which values come
from outside (feeds, the scope, stand-in zeros), which the run writes back, and after which
step each value is dead, so the flat loop drops it there (the reference semantics: a value
lives until its last reader). A value whose last readers read only its shape (an op
definition's `no_need_buffer` slots) keeps its buffer only until its last other reader: a
shape-only stand-in takes its place there.
"""
from __future__ import annotations

from ..core.variable import Variable
from ..errors import PreconditionError
from ..ops.registry import get_op_def
from ..record import FrozenRecord


class Liveness(FrozenRecord, frozen=True):
    """The dataflow of the ops a plan runs (on one rank), in the order the plan needs it."""

    __slots__ = ("needed_feeds", "scope_reads", "fetch_from_scope", "zero_reads",
                 "persist_writes", "frees_at", "shrinks_at")
    _fields = __slots__

    needed_feeds: list[str]
    """read before any op writes them and declared as data: what a feed must give"""
    scope_reads: list[str]
    """read before any op writes them and not fed: taken from the scope every run"""
    fetch_from_scope: list[str]
    """fetched but neither written nor fed: taken from the scope every run"""
    zero_reads: list[tuple[str, tuple, object]]
    """(name, shape, dtype) of the values read here but written only by other ranks' ops
    (Reduce mode): zeros stand in for them"""
    persist_writes: list[str]
    """persistable values an op writes: written back to the scope after a successful run"""
    frees_at: dict[int, list[str]]
    """step index -> the values dead after it (neither persistable, fetched nor, in a
    sub-block, its caller's)"""
    shrinks_at: dict[int, list[str]]
    """step index -> the values whose buffer is dead after it while later ops read only their
    shapes (their op definitions' no_need_buffer slots): a shape-only stand-in replaces
    them there (stand_in.py); freed as the others after their last reader"""

    def __init__(self, needed_feeds: list[str], scope_reads: list[str],
                 fetch_from_scope: list[str], zero_reads: list[tuple[str, tuple, object]],
                 persist_writes: list[str], frees_at: dict[int, list[str]],
                 shrinks_at: dict[int, list[str]]):
        set_ = object.__setattr__  # frozen: see spmd/record.py
        set_(self, "needed_feeds", needed_feeds)
        set_(self, "scope_reads", scope_reads)
        set_(self, "fetch_from_scope", fetch_from_scope)
        set_(self, "zero_reads", zero_reads)
        set_(self, "persist_writes", persist_writes)
        set_(self, "frees_at", frees_at)
        set_(self, "shrinks_at", shrinks_at)


def ops_for_rank(block, rank: int | None) -> list[tuple[int, object]]:
    """(program index, op) of the ops of `block` a plan for `rank` runs: all of them, but for
    the ops Reduce mode gave to another rank."""
    return [(i, op) for i, op in enumerate(block.ops)
            if rank is None or op.owner is None or op.owner == rank]


def liveness(block, ops, feed_names, fetch_names, block_index: int) -> Liveness:
    """The dataflow of `ops` (`ops_for_rank`'s) of `block`; a block other than 0 is a
    sub-block, whose caller's values are never freed."""
    var = block._var_recursive  # a sub-block reads its ancestors' variables
    kept = {i for i, _ in ops}
    foreign = {n for i, op in enumerate(block.ops) if i not in kept for n in op.output_arg_names}
    written: set[str] = set()
    reads_before_write: list[str] = []
    zero_reads: list[str] = []
    last_use: dict[str, int] = {}
    last_buffer: dict[str, int] = {}  # the last step reading (or writing) the value's data
    for k, (_, op) in enumerate(ops):
        for n in op.input_arg_names:
            if n not in written and n not in reads_before_write and n not in zero_reads:
                if n in foreign and not var(n).persistable:
                    zero_reads.append(n)
                else:
                    reads_before_write.append(n)
            last_use[n] = k
        for n in _buffer_reads(op):
            last_buffer[n] = k
        for n in op.output_arg_names:
            written.add(n)
            last_use[n] = max(last_use.get(n, k), k)
            last_buffer[n] = k
    zero_specs = [_zeros_spec(var(n)) for n in zero_reads]
    needed_feeds = [n for n in reads_before_write if var(n).is_data and not var(n).persistable]
    feed_set = set(feed_names)
    scope_reads = [n for n in reads_before_write if n not in feed_set]
    fetch_from_scope = [n for n in fetch_names if n not in written and n not in feed_set]
    persist_writes = sorted(n for n in written if var(n).persistable)
    keep = set(fetch_names) | {n for n, v in block.vars.items() if v.persistable}
    if block_index:  # a sub-block frees only its own temporaries, never its caller's values
        keep |= {n for n in last_use if n not in block.vars}
    frees_at: dict[int, list[str]] = {}
    shrinks_at: dict[int, list[str]] = {}
    for n, k in last_use.items():
        if n not in keep:
            frees_at.setdefault(k, []).append(n)
            kb = last_buffer.get(n)
            if kb is not None and kb < k:  # only shape reads after step kb
                shrinks_at.setdefault(kb, []).append(n)
    return Liveness(needed_feeds=needed_feeds, scope_reads=scope_reads,
                    fetch_from_scope=fetch_from_scope, zero_reads=zero_specs,
                    persist_writes=persist_writes, frees_at=frees_at, shrinks_at=shrinks_at)


def _buffer_reads(op):
    """The names `op` reads the data of: all its inputs but those only in no_need_buffer
    slots."""
    shape_only = get_op_def(op.type).no_need_buffer
    if not shape_only:
        return op.input_arg_names
    return [n for slot, names in op.inputs.items() if slot not in shape_only for n in names]


def _zeros_spec(var: Variable):
    if any(d < 0 for d in var.shape):
        raise PreconditionError(
            f"'{var.name}' is computed only on another rank but read here, and its shape "
            f"{list(var.shape)} is not fully known, so it cannot stand in as zeros")
    return var.name, tuple(var.shape), var.dtype
