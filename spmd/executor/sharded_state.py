"""Checkpoints of Reduce-mode optimizer state.

ReduceStrategy.Reduce keeps each optimizer state variable, or each row chunk of one, on its
owner rank only (passes/reduce_mode.py). A checkpoint must not depend on that split: the save
functions, given the data-parallel CompiledProgram, assemble every state variable whole, the
same arrays a one-process run saves, so the checkpoint loads into any run, at any rank count
and in either mode (a Reduce-mode program re-splits loaded state on its first run).

Assembling is a collective over the processes: each piece is broadcast from the process that
owns it, in one order computed from the layout alone, on a communicator of its own, so a
process that is not saving never pairs these broadcasts with a training step's collectives.
"""
from __future__ import annotations

import numpy as np

from ..core.scope import host_array
from ..errors import CommunicationError, PreconditionError


class ShardedState:
    """Where each piece of the Reduce-mode optimizer state lives, and how to assemble it."""

    def __init__(self, program, layout, scopes, ranks, comm, tag: str = ""):
        self._block = program.global_block()
        self._tag = f"{tag} " if tag else ""
        self._broken = ""
        self._scopes = scopes
        self._ranks = list(ranks)  # global rank of each local place
        self._comm = comm  # over the processes; None in a world of one process
        self._nplaces = len(self._ranks)
        pieces: dict[str, list] = {}
        for var, owner in layout.state_owner.items():
            whole, rows = layout.state_source.get(var, (var, None))
            # a chunked parameter's scalar state (Adam's beta powers) has one identical copy
            # per chunk: assemble from the first chunk's
            order = rows[0] if rows else _chunk_index(var)
            pieces.setdefault(whole, []).append((order, var, owner, rows is not None))
        self._pieces = {whole: sorted(p) for whole, p in pieces.items()}

    def owners(self) -> dict:
        """whole state variable -> the ranks that hold it (or its chunks)."""
        return {whole: sorted({owner for _, _, owner, _ in pieces})
                for whole, pieces in self._pieces.items()}

    def gather(self, names) -> dict:
        """name -> whole host array, for every Reduce-sharded state variable in `names`.

        Every process must call it with the same names (the broadcasts pair up in order). A
        barrier comes first: a save on some ranks only fails there (after the collective
        timeout) rather than leave a broadcast pending to pair with the next save's."""
        if self._broken:
            raise PreconditionError(
                f"{self._tag}cannot save the Reduce-mode optimizer state: an earlier save failed "
                f"midway ({self._broken}), and its collectives no longer pair up across ranks; "
                f"restart the job")
        out = {}
        try:
            if self._comm is not None:
                self._comm.barrier()
            for whole in sorted(set(names) & self._pieces.keys()):
                pieces = self._pieces[whole]
                if not pieces[0][3]:  # one whole variable, or identical per-chunk copies
                    pieces = pieces[:1]
                out[whole] = _concat([self._fetch(var, owner) for _, var, owner, _ in pieces])
        except CommunicationError as e:
            self._broken = "a rank did not join"
            raise CommunicationError(
                f"{self._tag}saving the Reduce-mode optimizer state is collective: every rank "
                f"must call the save (with the CompiledProgram) at the same point, as each rank "
                f"holds part of the state; a rank did not join. Call it on every rank, not "
                f"only on rank 0 ({e})") from None
        return out

    def _fetch(self, var: str, owner: int) -> np.ndarray:
        process, place = divmod(owner, self._nplaces)
        if owner in self._ranks:
            value = np.ascontiguousarray(host_array(self._scopes[place].get(var)))
        else:
            decl = self._block.vars[var]
            value = np.empty(tuple(decl.shape), dtype=decl.dtype)
        if self._comm is not None:
            self._comm.broadcast(value, process)
        return value


def _chunk_index(var: str) -> int:
    _, _, index = var.rpartition("@SHARD")
    return int(index) if index.isdigit() else 0


def _concat(parts: list) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
