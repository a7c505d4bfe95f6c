"""What a collective kernel talks to (attrs["_comm"]): one place's communicator, and the thread
that runs its collectives so communication overlaps the rest of the backward pass.

All collectives of a context run on one thread in the order the program issues them, which is
the same on every rank, so ranks never disagree about which collective comes next. A kernel
returns at once; `wait_all` (the c_sync_comm_stream op, and the end of every run) waits for them
and re-raises the first failure, a CommunicationError naming the rank and the op.
"""
from __future__ import annotations

import concurrent.futures
import threading

from ..comm.base import Communicator, SelfCommunicator
from ..errors import CommunicationError, InvalidArgumentError


class CommContext:
    def __init__(self, make_comm, overlap: bool = True, name: str = "spmd-comm"):
        """`make_comm()` builds the communicator on first use (MPI and NCCL are not touched by
        programs that never communicate)."""
        self._make_comm = make_comm
        self._comm: Communicator | None = None
        self._overlap = overlap
        self._name = name
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: list[concurrent.futures.Future] = []
        self._lock = threading.RLock()

    @property
    def comm(self) -> Communicator:
        # made once even when several place threads reach it together: making an MPI
        # communicator is itself a collective, and two at once would cross their messages
        with self._lock:
            if self._comm is None:
                self._comm = self._make_comm()
        return self._comm

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def size(self) -> int:
        return self.comm.size

    def init(self, nranks: int, rank: int, endpoints: list, current_endpoint: str):
        """c_comm_init: build the communicator and check it is the world the program expects."""
        comm = self.comm
        tag = f"[rank {comm.rank}/{comm.size}]"
        if (nranks, rank) != (comm.size, comm.rank):
            raise InvalidArgumentError(
                f"{tag} the program was transpiled for trainer {rank} of {nranks} but this "
                f"process is rank {comm.rank} of {comm.size}; pass trainer_id=<MPI rank> and "
                f"one endpoint per MPI process to DistributeTranspiler.transpile")
        if endpoints and current_endpoint and endpoints[rank] != current_endpoint:
            raise InvalidArgumentError(
                f"{tag} current_endpoint {current_endpoint} is not entry {rank} of the trainer "
                f"endpoints {endpoints}")

    def _run(self, fn, *args):
        if not self._overlap or isinstance(self.comm, SelfCommunicator):
            fn(*args)
            return
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=self._name)
        with self._lock:
            self._pending.append(self._pool.submit(fn, *args))

    def allreduce(self, buf):
        self._run(self.comm.allreduce, buf)

    def reduce(self, buf, root: int):
        self._run(self.comm.reduce, buf, root)

    def broadcast(self, buf, root: int):
        self._run(self.comm.broadcast, buf, root)

    def wait_all(self):
        """Wait for every collective issued so far; re-raise the first failure."""
        with self._lock:
            pending, self._pending = self._pending, []
        error = None
        for future in pending:
            try:
                future.result()
            except Exception as e:  # noqa: BLE001 - keep waiting for the rest, then raise
                error = error or e
        if error is not None:
            if isinstance(error, CommunicationError):
                raise error
            raise CommunicationError(
                f"{self.comm.describe()} collective failed: {error}") from error

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


_world_contexts: dict = {}


def world_context(place) -> CommContext:
    """The process's context over all processes (the nccl2-mode world): MPI for host places,
    NCCL for a GPU place, a world of one when not launched by MPI."""
    key = getattr(place, "device_id", None) if place is not None and place.is_gpu else "cpu"
    ctx = _world_contexts.get(key)
    if ctx is None:
        ctx = CommContext(lambda: _make_world_comm(place), overlap=not place.is_gpu)
        _world_contexts[key] = ctx
    return ctx


def _make_world_comm(place) -> Communicator:
    from ..comm.topology import detect

    topology = detect()
    if topology.size == 1:
        return SelfCommunicator()
    from ..comm.mpi import MPICommunicator

    mpi = MPICommunicator()
    if place.is_gpu:
        from ..comm.nccl import NCCLCommunicator

        return NCCLCommunicator(place.device_id, mpi)
    return mpi
