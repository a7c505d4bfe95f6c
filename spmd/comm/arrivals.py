"""Which ranks reached a collective: a board in node-shared memory.

Each rank posts, with two plain stores per collective, how many collectives it has entered on a
communicator and the kind of the last one. When a collective times out, the rank reads its
node's board and names the ranks that never reached that collective, and where they stopped.
Reading needs nothing from the other ranks (no message, no MPI progress), so it works while
they are hung. Ranks on other nodes are not on this node's board; the message says so.
"""
from __future__ import annotations

import numpy as np

OPS = ("allreduce", "reduce", "broadcast", "allgather", "reduce_scatter", "barrier")


class ArrivalBoard:
    def __init__(self, comm):
        """Collective over the mpi4py communicator `comm` (every rank makes one, together)."""
        from mpi4py import MPI

        self._world_size = comm.Get_size()
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self._node, n = node, node.Get_size()
        itemsize = np.dtype(np.int64).itemsize
        self._win = MPI.Win.Allocate_shared(2 * n * itemsize if node.Get_rank() == 0 else 0,
                                            itemsize, comm=node)
        buf, _ = self._win.Shared_query(0)
        self._slots = np.ndarray((n, 2), dtype=np.int64, buffer=buf)
        self._me = node.Get_rank()
        self._slots[self._me] = (0, -1)
        self._ranks = np.empty(n, dtype=np.int64)  # world rank of each node rank
        node.Allgather(np.array([comm.Get_rank()], dtype=np.int64), self._ranks)
        node.Barrier()  # every slot is zeroed before anyone posts
        self.count, self.op = 0, -1

    def arrive(self, op: str) -> None:
        self.count += 1
        self.op = OPS.index(op)
        self._slots[self._me, 0] = self.count
        self._slots[self._me, 1] = self.op

    def missing(self) -> str:
        """Who has not reached this rank's latest collective, as a sentence ('' if all)."""
        mine = self.count
        behind, waiting, other_kind = [], [], []
        for i, (count, op) in enumerate(self._slots.tolist()):
            if i == self._me:
                continue
            rank = int(self._ranks[i])
            if count < mine:
                last = (f"its last was #{count}, {OPS[op]}" if count > 0
                        else "it entered none yet")
                behind.append(f"{rank} ({last})")
            elif count == mine and op == self.op:
                waiting.append(rank)
            elif count == mine:
                other_kind.append(f"{rank} (in {OPS[op]})")
        parts = []
        if behind:
            parts.append(f"rank(s) {', '.join(behind)} never reached it")
        if other_kind:
            parts.append(f"rank(s) {', '.join(other_kind)} entered another collective as "
                         f"#{mine}, where this rank is in {OPS[self.op]}: the ranks run "
                         f"different programs")
        if waiting:
            parts.append(f"rank(s) {sorted(waiting)} wait in it too")
        if self._world_size > len(self._ranks):
            parts.append(f"the {self._world_size - len(self._ranks)} rank(s) on other nodes "
                         f"are not visible from here")
        if not parts:
            return ""
        return f"collective #{mine} on this communicator: " + "; ".join(parts)
