"""The first data-parallel run's broadcast of rank 0's persistables, written into each rank's
own arrays in place.

The c_broadcast program (passes/broadcast_params.py) packs each variable into a fresh buffer
and puts the result in the scope, so while it runs every rank holds each persistable twice: a
1M x 64 table with lazy Adam's two moments grew every rank by 768 MB more than the table and
its state (issue 24). Here each host array is broadcast into itself (MPI Bcast into the
receiving buffer; rank 0 sends its own), in chunks of `CHUNK_BYTES` so that no backend's
staging (the in-process groups copy the root's piece) is ever table-sized. What is not a host
array (a device array, a SelectedRows) still goes through the c_broadcast program.

Every rank must agree on what is broadcast and how (the broadcasts pair up in order): rank 0's
list of (name, dtype, shape, in place or not) is compared first, and a rank whose scope differs
(another startup program, a checkpoint of another shape) fails on every rank with the name.
"""
from __future__ import annotations

import numpy as np

from ..core.operator import OpRole
from ..core.program import Program
from ..errors import PreconditionError

CHUNK_BYTES = 8 << 20  # per collective: bounds any staging copy, far below a large table


def in_place(value) -> bool:
    """Whether `value` is broadcast into itself: a host array (one not C-contiguous is made
    so first, on the rank that holds it: the choice must not differ between ranks)."""
    return isinstance(value, np.ndarray)


def broadcast_names(bcast: Program) -> list[str]:
    """The variables the c_broadcast program `bcast` broadcasts, in its order."""
    return [op.inputs["X"][0] for op in bcast.global_block().ops]


def describe(names, value_of) -> str:
    """One line per name: name, dtype, shape, and whether it goes in place."""
    lines = []
    for n in names:
        v = value_of(n)
        how = "in place" if in_place(v) else "program"
        lines.append(f"{n} {getattr(v, 'dtype', '?')} {list(getattr(v, 'shape', ()))} {how}")
    return "\n".join(lines)


def check_same_persistables(bcast: Program, value_of, mpi) -> None:
    """Raise on every rank when any rank's `describe` of what `bcast` broadcasts differs
    from rank 0's (`mpi`: an MPICommunicator over the processes)."""
    text = describe(broadcast_names(bcast), value_of)
    root = mpi.bcast_bytes(text.encode() if mpi.rank == 0 else None, 0).decode()
    mine, theirs = text.split("\n"), root.split("\n")
    differs = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b),
                   None if len(mine) == len(theirs) else min(len(mine), len(theirs)))
    flags = mpi.allgather(np.array([0 if differs is None else 1], np.int64)).reshape(-1)
    if not flags.any():
        return
    bad = [int(r) for r in np.flatnonzero(flags)]
    here = (f"here '{mine[differs]}'" if differs is not None and differs < len(mine)
            else "here nothing")
    there = (f"rank 0 '{theirs[differs]}'" if differs is not None and differs < len(theirs)
             else "rank 0 nothing")
    raise PreconditionError(
        f"{mpi.describe()} the first data-parallel run broadcasts rank 0's persistables, but "
        f"ranks {bad} hold different ones (name dtype shape): "
        + (f"{here}, {there}" if differs is not None else "this rank agrees with rank 0")
        + "; run the same startup program (or load the same checkpoint) on every rank before "
        "the first run")


def broadcast_chunks(array, comm, root: int = 0, chunk_bytes: int = CHUNK_BYTES) -> None:
    """`root`'s `array` into every rank's `array` (same shape and dtype), in place, in pieces
    of at most `chunk_bytes`."""
    flat = array.reshape(-1)  # a view: the array is C-contiguous
    step = max(1, chunk_bytes // max(1, array.itemsize))
    for start in range(0, flat.size, step):
        comm.broadcast(flat[start:start + step], root)


def split_by_kind(bcast: Program, value_of):
    """(names broadcast in place, a c_broadcast program of the rest or None), from the
    program broadcast_program made; order kept."""
    names = broadcast_names(bcast)
    direct = [n for n in names if in_place(value_of(n))]
    rest = [n for n in names if n not in set(direct)]
    if not rest:
        return direct, None
    src = bcast.global_block()
    program = Program()
    out = program.global_block()
    for n in rest:
        v = src.vars[n]
        out.create_var(name=n, shape=v.shape, dtype=v.dtype, persistable=True)
        out.append_op("c_broadcast", {"X": [n]}, {"Out": [n]}, {"root": 0},
                      role=OpRole.COMMUNICATE)
    return direct, program


def broadcast_into_scope(scope, names, comm, source) -> None:
    """Broadcast each of `names` from rank 0 into `scope`'s own array, in place. A place's
    scope that holds no array of its own for a name (it lives in a parent of `source`, the
    first place's scope) gets a copy of `source`'s first: every place needs one anyway."""
    for n in names:
        value = scope.get(n)
        if not in_place(value):
            value = source.get(n).copy()
            scope.put(n, value)
        elif not value.flags.c_contiguous:  # MPI needs one buffer: this one array is copied
            value = np.ascontiguousarray(value)
            scope.put(n, value)
        broadcast_chunks(value, comm)
