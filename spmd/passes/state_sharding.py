"""StateSharding: where ReduceStrategy.Reduce keeps each piece of optimizer state.

The Reduce-mode pass (reduce_mode.py) makes one; the data-parallel job owns it.
It says which rank owns each state variable (or each row chunk of one, `name@SHARDc`) and how
a chunk's state is cut from the whole state the startup program made. On the program's first
run it splits the scope's state accordingly (`place_state`); the save functions ask the
compiled program (its job) for it and `gather` assembles every state variable whole, the same
arrays a one-process run saves, so a checkpoint loads at any rank count and in either mode.

Scope stays a plain name -> array map: which scopes hold split state the executor that ran
the job records (Executor.state_sharding(scope)), for the save and load functions' checks.

Assembling is a collective over the processes: each piece is broadcast from the process that
owns it, in one order computed from the sharding alone, on a communicator of its own, so a
process that is not saving never pairs these broadcasts with a training step's collectives.

>>> StateSharding(state_owner={"m": 1}).owners()
{'m': [1]}
"""
from __future__ import annotations

import numpy as np

from ..core.scope import host_array
from ..errors import CommunicationError, PreconditionError
from ..record import FrozenRecord, Record


class Shard(FrozenRecord):
    """Rows [start, stop) of a parameter, or elements [start, stop) of it flattened (`flat`,
    reduce_flat.py), owned by `owner`; neither: all of it."""

    __slots__ = ("param", "index", "rows", "owner", "flat")
    _fields = __slots__

    def __init__(self, param: str, index: int, rows: tuple | None, owner: int,
                 flat: tuple | None = None):
        self.param, self.index, self.rows, self.owner, self.flat = param, index, rows, owner, flat

    @property
    def cut(self) -> bool:
        return self.rows is not None or self.flat is not None

    @property
    def span(self) -> tuple | None:
        """(start, stop) of the rows or of the flat elements; None for a whole parameter."""
        return self.rows if self.rows is not None else self.flat

    def name(self, var: str) -> str:
        return var if not self.cut else f"{var}@SHARD{self.index}"


class Placement(Record):
    """Where a bound StateSharding's state lives at run time (the job binds it on its first
    run): the data-parallel program's global block, the places' scopes and global ranks, the
    communicator over the processes (None in a world of one process), the "[rank r/n] " tag,
    each whole state variable's pieces in assembly order, and why saving broke (if it did)."""

    __slots__ = ("block", "scopes", "ranks", "comm", "tag", "pieces", "broken")
    _fields = __slots__

    def __init__(self, block, scopes: list, ranks: list, comm, tag: str, pieces: dict,
                 broken: str = ""):
        self.block, self.scopes, self.ranks, self.comm = block, scopes, ranks, comm
        self.tag, self.pieces, self.broken = tag, pieces, broken


class StateSharding(Record):
    """Which rank owns each piece of optimizer state, and (once bound) where it lives."""

    # compared and shown by these; `placement` (bound by its job on the first run) is not
    _fields = ("state_owner", "state_source", "shards", "state_flat")

    def __init__(self, state_owner: dict | None = None, state_source: dict | None = None,
                 shards: dict | None = None, state_flat: set | None = None,
                 placement: Placement | None = None):
        self.state_owner = {} if state_owner is None else state_owner  # state var -> owner
        # chunk state var -> (whole var, rows)
        self.state_source = {} if state_source is None else state_source
        self.shards = {} if shards is None else shards  # param -> [Shard] (reduce_mode.py)
        # chunk state vars whose `rows` are elements of the whole flattened (reduce_flat.py)
        self.state_flat = set() if state_flat is None else state_flat
        self.placement = placement

    def owners(self) -> dict:
        """whole state variable -> the ranks that hold it (or its chunks)."""
        held: dict[str, set] = {}
        for var, owner in self.state_owner.items():
            whole, _ = self.state_source.get(var, (var, None))
            held.setdefault(whole, set()).add(owner)
        return {whole: sorted(ranks) for whole, ranks in held.items()}

    # -- on the first run ----------------------------------------------------------------------
    def place_state(self, scope, rank: int) -> None:
        """Keep in `scope` only the optimizer state `rank` owns, cutting a chunk's state from
        the state the startup program made for the whole parameter."""
        cut = {}
        for chunk, (whole, rows) in self.state_source.items():
            if self.state_owner[chunk] == rank:
                value = scope.get(whole)
                if value is None:
                    raise PreconditionError(
                        f"optimizer state '{whole}' is not in the scope: a Reduce-mode "
                        f"CompiledProgram already split it across the ranks in this scope (or "
                        f"the startup program was not run); run the startup program into a "
                        f"fresh scope for a new Reduce-mode program")
                if chunk in self.state_flat:
                    cut[chunk] = value.reshape(-1)[rows[0]:rows[1]].copy()
                else:
                    cut[chunk] = value[rows[0]:rows[1]].copy() if rows else value.copy()
        for chunk, value in cut.items():
            scope.put(chunk, value)
        scope.erase({whole for whole, _ in self.state_source.values()})
        scope.erase([var for var, owner in self.state_owner.items() if owner != rank])

    def bind(self, program, scopes, ranks, comm, tag: str = "") -> None:
        """Where the state lives at run time, for `gather`."""
        pieces: dict[str, list] = {}
        for var, owner in self.state_owner.items():
            whole, rows = self.state_source.get(var, (var, None))
            # a chunked parameter's scalar state (Adam's beta powers) has one identical copy
            # per chunk: assemble from the first chunk's
            order = rows[0] if rows else _chunk_index(var)
            pieces.setdefault(whole, []).append((order, var, owner, rows is not None))
        self.placement = Placement(program.global_block(), scopes, list(ranks), comm,
                                   f"{tag} " if tag else "",
                                   {whole: sorted(p) for whole, p in pieces.items()})

    @property
    def timeout_s(self) -> float | None:
        """How long `gather` waits for the other ranks (None in a world of one process)."""
        comm = self.placement.comm if self.placement is not None else None
        return None if comm is None else comm.timeout_s

    @timeout_s.setter
    def timeout_s(self, seconds: float) -> None:
        comm = self.placement.comm if self.placement is not None else None
        if comm is not None:
            comm.timeout_s = seconds

    # -- saving --------------------------------------------------------------------------------
    def gather(self, names) -> dict:
        """name -> whole host array, for every sharded state variable in `names`.

        Every process must call it with the same names (the broadcasts pair up in order). A
        barrier comes first: a save on some ranks only fails there (after the collective
        timeout) rather than leave a broadcast pending to pair with the next save's."""
        bound = self.placement
        if bound is None:
            raise PreconditionError("the Reduce-mode program has not run yet: nothing is split")
        tag = bound.tag
        if bound.broken:
            raise PreconditionError(
                f"{tag}cannot save the Reduce-mode optimizer state: an earlier save failed "
                f"midway ({bound.broken}), and its collectives no longer pair up across "
                f"ranks; restart the job")
        out = {}
        try:
            if bound.comm is not None:
                bound.comm.barrier()
            for whole in sorted(set(names) & bound.pieces.keys()):
                pieces = bound.pieces[whole]
                if not pieces[0][3]:  # one whole variable, or identical per-chunk copies
                    pieces = pieces[:1]
                parts = [self._fetch(var, owner) for _, var, owner, _ in pieces]
                if pieces[0][1] in self.state_flat:  # flat pieces: the whole, flattened
                    shape = tuple(bound.block.vars[whole].shape)
                    out[whole] = np.concatenate(parts).reshape(shape)
                else:
                    out[whole] = _concat(parts)
        except CommunicationError as e:
            bound.broken = "a rank did not join"
            raise CommunicationError(
                f"{tag}saving the Reduce-mode optimizer state is collective: every rank must "
                f"call the save (with the CompiledProgram) at the same point, as each rank "
                f"holds part of the state; a rank did not join. Call it on every rank, not "
                f"only on rank 0 ({e})") from None
        return out

    def _fetch(self, var: str, owner: int) -> np.ndarray:
        bound = self.placement
        process, place = divmod(owner, len(bound.ranks))
        if owner in bound.ranks:
            value = np.ascontiguousarray(host_array(bound.scopes[place].get(var)))
        else:
            decl = bound.block.vars[var]
            value = np.empty(tuple(decl.shape), dtype=decl.dtype)
        if bound.comm is not None:
            bound.comm.broadcast(value, process)
        return value


def _chunk_index(var: str) -> int:
    _, _, index = var.rpartition("@SHARD")
    return int(index) if index.isdigit() else 0


def _concat(parts: list) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
