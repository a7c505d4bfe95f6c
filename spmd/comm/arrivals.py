"""Which ranks reached a collective: a board in node-shared memory.

Each rank posts, with two plain stores per collective, how many collectives it has entered on a
communicator and the kind of the last one. When a collective times out, the rank reads its
node's board and names the ranks that never reached that collective, and where they stopped.
Reading needs nothing from the other ranks (no message, no MPI progress), so it works while
they are hung. The memory is an MPI shared window, or for trainers joined without a launcher
(spmd/comm/join.py), whose worlds share none, a file in /dev/shm. Ranks on other nodes are not
on this node's board; the message says so.
"""
from __future__ import annotations

import os

import numpy as np

OPS = ("allreduce", "reduce", "broadcast", "allgather", "reduce_scatter", "barrier")


def same_host_ranks(comm, host: str) -> list[int]:
    """The ranks of mpi4py communicator `comm` whose host name is `host` (collective; each
    rank passes its own)."""
    width = 64
    mine = np.zeros(width, dtype=np.uint8)
    raw = host.encode()[:width]
    mine[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    names = np.empty((comm.Get_size(), width), dtype=np.uint8)
    comm.Allgather(mine, names)
    return [r for r in range(comm.Get_size()) if names[r].tobytes() == mine.tobytes()]


class ArrivalBoard:
    def __init__(self, comm):
        """Collective over the mpi4py communicator `comm` (every rank makes one, together)."""
        self._world_size = comm.Get_size()
        from .join_mark import joined_start

        if joined_start():  # worlds joined by connect/accept share no MPI window
            self._slots, self._me, self._ranks = _file_board(comm)
        else:
            self._slots, self._me, self._ranks = self._window_board(comm)
        self.count, self.op = 0, -1

    def _window_board(self, comm):
        from mpi4py import MPI

        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self._node, n = node, node.Get_size()
        itemsize = np.dtype(np.int64).itemsize
        self._win = MPI.Win.Allocate_shared(2 * n * itemsize if node.Get_rank() == 0 else 0,
                                            itemsize, comm=node)
        buf, _ = self._win.Shared_query(0)
        slots = np.ndarray((n, 2), dtype=np.int64, buffer=buf)
        me = node.Get_rank()
        slots[me] = (0, -1)
        ranks = np.empty(n, dtype=np.int64)  # world rank of each node rank
        node.Allgather(np.array([comm.Get_rank()], dtype=np.int64), ranks)
        node.Barrier()  # every slot is zeroed before anyone posts
        return slots, me, ranks

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


def _file_board(comm):
    """The board in a file of /dev/shm mapped by the ranks of one host (trainers joined
    without a launcher: MPI has no shared window across their worlds). The host's first rank
    makes it and removes its name once every rank has it mapped: nothing is left behind."""
    import mmap
    import secrets
    import socket
    import tempfile

    rank = comm.Get_rank()
    ranks = same_host_ranks(comm, socket.gethostname())
    me, n = ranks.index(rank), len(ranks)
    job = np.frombuffer(secrets.token_bytes(8), dtype=np.uint8).copy()
    comm.Bcast(job, root=0)
    folder = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    path = os.path.join(folder, f"spmd-arrivals-{job.tobytes().hex()}-{ranks[0]}")
    size = 2 * n * np.dtype(np.int64).itemsize
    if me == 0:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, size)
    comm.Barrier()
    if me != 0:
        fd = os.open(path, os.O_RDWR)
    mapping = mmap.mmap(fd, size)
    os.close(fd)
    comm.Barrier()  # every rank of the host has it mapped
    if me == 0:
        os.unlink(path)
    slots = np.ndarray((n, 2), dtype=np.int64, buffer=mapping)
    slots[me] = (0, -1)
    comm.Barrier()  # every slot is set before anyone posts
    return slots, me, np.array(ranks, dtype=np.int64)
