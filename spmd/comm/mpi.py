"""Collectives on host arrays over MPI: mpi4py's buffer methods (never the pickle-based
lowercase ones), on contiguous arrays, with a timeout instead of a hang.

Blocking calls are the non-blocking ones polled under the communicator's watchdog
(comm/watchdog.py): a collective still pending after the collective timeout raises
CommunicationError naming the op, instead of hanging.
"""
from __future__ import annotations

import functools
import os
import sys
import time

import numpy as np

from .. import events
from ..errors import CommunicationError
from .base import Communicator, check_divisible, check_reduction, register_backend
from .watchdog import Watchdog

_met = False


def world():
    """mpi4py's COMM_WORLD (for trainers started with PADDLE_* variables only, the world they
    joined: spmd/comm/join.py). The first call loads MPI and connects this rank's supervisor
    to the others' (spmd.guard), so a rank that leaves early fails the job at once."""
    global _met
    # from now on this rank is in MPI: no stand-in may join for it
    events.supervision.note_mpi_starting()
    if not _met:
        # dying from here to the rendezvous: the peers are told
        events.supervision.note_job_start(True)
    if "mpi4py.MPI" not in sys.modules:
        skip_ucx_memory_hooks_on_one_node(os.environ)
        _start_mpi_in_time()
    from mpi4py import MPI

    if not MPI.Is_initialized():  # imported without initializing (launch.mpi asks a vendor so)
        if MPI.Is_finalized():
            raise CommunicationError(
                "MPI was finalized in this process (MPI.Finalize() was called), so spmd cannot "
                "use it any more; finalize only at the very end of the program")
        MPI.Init_thread(MPI.THREAD_MULTIPLE)  # what mpi4py's own initialization asks for
    comm = MPI.COMM_WORLD
    from .join_mark import joined_start

    if joined_start():  # trainers started without a launcher: their joined world
        from .join import joined_world

        comm = joined_world()
    if not _met:
        _met = True
        events.supervision.rendezvous(comm)
        events.supervision.note_job_start(False)
    return comm


def skip_ucx_memory_hooks_on_one_node(env) -> bool:
    """UCX_MEM_EVENTS=no in `env` for a job Hydra started on one node, unless it is set
    already; whether it set it. Loading the MPICH wheel's libmpi runs UCX's memory hooks,
    which keep UCX's RDMA registration cache true and cost each rank about 40 ms of its MPI
    start-up (loading libmpi: 45 ms -> 4 ms of CPU; import and MPI_Init 95 -> 45 ms wall,
    measured at 2 ranks). On one node MPICH's ranks talk through shared memory and UCX's cache
    holds nothing. Across nodes, in joined worlds (which may span nodes) and under other
    launchers the hooks stay."""
    from ..launcher_vars import one_node, started_by_hydra
    from .join_mark import joined_start

    if "UCX_MEM_EVENTS" in env or not started_by_hydra(env) or not one_node(env) or \
            joined_start(env):
        return False
    env["UCX_MEM_EVENTS"] = "no"
    return True


def _start_mpi_in_time() -> None:
    """MPI_Init, bounded by the collective timeout: it waits for every rank of the job, and a
    rank that hangs before its first MPI use would hold it forever. Past the timeout this rank
    fails, and its supervisor ends the job (spmd/guard/supervisor.py)."""
    from ..flags import flags

    timeout = flags().collective_timeout_s
    if not init_mpi_within(timeout, _stop_if_a_peer_died):
        from ..launcher_vars import rank_size

        events.supervision.note_mpi_start_failed()
        rank, size = rank_size(os.environ) or (0, 1)
        raise CommunicationError(
            f"[rank {rank}/{size}] MPI start-up did not complete within {timeout:g} s "
            f"(SPMD_COLLECTIVE_TIMEOUT): another rank never started MPI (it hangs, or works "
            f"longer than that before its first collective); every rank must reach its first "
            f"collective (the startup program's run) within the timeout")


def _stop_if_a_peer_died() -> None:
    """While MPI_Init waits: a peer that died in its own start-up will never come."""
    text = events.supervision.peer_died_in_start()
    if text is not None:
        events.supervision.note_mpi_start_failed()  # MPI is half started: exit at once, end the job
        raise events.StoppedByPeer(text)


def init_mpi_within(timeout_s: float, check=None) -> bool:
    """Initialize MPI (MPI_THREAD_MULTIPLE) unless it takes longer than `timeout_s`; whether
    it did. MPI_Init cannot be interrupted, and mpi4py's Init_thread keeps the GIL while it
    waits: it is called through ctypes (a foreign call releases the GIL) in a thread, and
    mpi4py then finds MPI initialized. Where the library cannot be found so, mpi4py's own
    initialization at import, unbounded. `check()`, called while it waits, may raise to stop
    the wait."""
    import ctypes
    import threading

    import mpi4py

    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = True  # as when mpi4py initializes MPI itself
    from mpi4py import MPI

    if MPI.Is_initialized():
        return True
    from ..launcher_vars import loaded_libmpi

    library = loaded_libmpi()
    if library is None:
        MPI.Init_thread(MPI.THREAD_MULTIPLE)
        return True
    init = ctypes.CDLL(library).MPI_Init_thread
    provided = ctypes.c_int(0)
    started = threading.Event()
    threading.Thread(target=lambda: (init(None, None, MPI.THREAD_MULTIPLE,
                                          ctypes.byref(provided)), started.set()),
                     name="spmd-mpi-init", daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while not started.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            return False
        if check is not None:
            check()
    return True


def _check_contiguous(array, op: str):
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        kind = "a non-contiguous ndarray" if isinstance(array, np.ndarray) else type(
            array).__name__
        raise CommunicationError(
            f"{op} needs a C-contiguous numpy array, got {kind}; use numpy.ascontiguousarray")


_COLLECTIVES = ("allreduce", "reduce", "broadcast", "allgather", "reduce_scatter", "barrier")


@register_backend("mpi")
class MPICommunicator(Communicator):
    """Collectives over an mpi4py communicator (COMM_WORLD by default)."""

    def __init__(self, comm=None, timeout_s: float | None = None, track_arrivals=False):
        """`track_arrivals`: keep an ArrivalBoard (see track_arrivals())."""
        if comm is None:
            comm = world()
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self._watchdog = Watchdog(self, timeout_s)  # None: SPMD_COLLECTIVE_TIMEOUT
        from mpi4py import MPI

        self._MPI = MPI
        self._board = None
        self._tracking = False
        self.abandoned: list = []  # (request, its buffers) of collectives that timed out
        if track_arrivals:
            self.track_arrivals()

    def track_arrivals(self):
        """From the next collective on, keep an ArrivalBoard so a timeout names the ranks that
        never reached the collective. The board is made then, as part of that collective on
        every rank, after a barrier under the timeout: a rank that never comes fails the
        others in time, and making it costs nothing where nothing is ever communicated."""
        self._tracking = self.size > 1

    def _enter(self, op: str):
        events.supervision.note_collective()
        if self._tracking:
            if self._board is None:
                self._tracking = False  # the set-up's own barrier is not on the board
                self._wait(self.comm.Ibarrier(), f"{op} (setting up the arrival board)")
                from .arrivals import ArrivalBoard

                self._board = ArrivalBoard(self.comm)
                self._tracking = True
            self._board.arrive(op)

    def arrive(self, op: str) -> None:
        """Count a collective that this communicator's processes run together by other means
        (comm/hierarchy.py's allreduce, over sub-communicators) as one of its own, so the
        arrival board still names the ranks that never reached it."""
        self._enter(op)

    def missing(self) -> str:
        return self._board.missing() if self._board is not None else ""

    def _wait(self, req, op: str, *buffers):
        """Wait for `req` under the watchdog. One that fails leaves the request posted (MPI has
        no way to cancel a collective): a late rank may still complete it, writing into
        `buffers`, so they are kept alive with it (`abandoned`) instead of freed."""
        if req.Test():
            return
        try:
            self.watchdog.poll(op, req.Test, self)
        except CommunicationError:
            self.abandoned.append((req, buffers))
            raise

    def _op(self, reduction: str):
        return getattr(self._MPI, check_reduction(reduction).upper())  # MPI.SUM, MPI.MAX, ...

    # Each collective once: the MPI call it posts, polled under the watchdog (the blocking
    # form is the non-blocking one plus the wait); with `untimed=True` MPICH's blocking call
    # instead, no timeout of its own: what the progress engines run under the same watchdog
    # (MPICH's blocking collectives pick faster algorithms than their non-blocking forms,
    # measured: Iallreduce about 20% slower on 2.7 MB).

    def allreduce(self, array, reduction: str = "sum", untimed: bool = False):
        _check_contiguous(array, "allreduce")
        op = self._op(reduction)
        self._enter("allreduce")
        if untimed:
            self.comm.Allreduce(self._MPI.IN_PLACE, array, op=op)
        else:
            self._wait(self.comm.Iallreduce(self._MPI.IN_PLACE, array, op=op), "allreduce",
                       array)
        return array

    def reduce(self, array, root: int, reduction: str = "sum", untimed: bool = False):
        _check_contiguous(array, "reduce")
        op = self._op(reduction)
        self._enter("reduce")
        send, recv = (self._MPI.IN_PLACE, array) if self.rank == root else (array, None)
        if untimed:
            self.comm.Reduce(send, recv, op=op, root=root)
        else:
            self._wait(self.comm.Ireduce(send, recv, op=op, root=root), f"reduce(root={root})",
                       array)
        return array

    def broadcast(self, array, root: int, untimed: bool = False):
        _check_contiguous(array, "broadcast")
        self._enter("broadcast")
        if untimed:
            self.comm.Bcast(array, root=root)
        else:
            self._wait(self.comm.Ibcast(array, root=root), f"broadcast(root={root})", array)
        return array

    def allgather(self, array, out=None, untimed: bool = False):
        send, out = self._allgather_buffers(array, out)
        self._enter("allgather")
        if untimed:
            self.comm.Allgather(send, out)
        else:
            self._wait(self.comm.Iallgather(send, out), "allgather", array, out)
        return out

    def _allgather_buffers(self, array, out):
        """(what to send, where the result goes): MPI_IN_PLACE when `array` is out[rank] (the
        fast way: an all-gather into a fresh buffer also pays its first touch, measured here
        6x slower than in place on 2.7 MB)."""
        _check_contiguous(array, "allgather")
        if out is None:
            return array, np.empty((self.size,) + array.shape, dtype=array.dtype)
        _check_contiguous(out, "allgather")
        if out.shape != (self.size,) + array.shape or out.dtype != array.dtype:
            raise CommunicationError(
                f"{self.describe()} allgather into out of shape {list(out.shape)} {out.dtype}; "
                f"expected {[self.size] + list(array.shape)} {array.dtype}")
        if np.shares_memory(array, out):
            if not np.shares_memory(array, out[self.rank]) or array.size != out[0].size:
                raise CommunicationError(
                    f"{self.describe()} allgather: the array overlaps `out` but is not "
                    f"out[{self.rank}], this rank's section")
            return self._MPI.IN_PLACE, out
        return array, out

    def reduce_scatter(self, array, untimed: bool = False):
        _check_contiguous(array, "reduce_scatter")
        check_divisible(self, array)  # before MPI: mpi4py would raise a ValueError
        out = np.empty(array.size // self.size, dtype=array.dtype)
        self._enter("reduce_scatter")
        if untimed:
            self.comm.Reduce_scatter_block(array.reshape(-1), out, op=self._MPI.SUM)
        else:
            self._wait(self.comm.Ireduce_scatter_block(array.reshape(-1), out,
                                                       op=self._MPI.SUM),
                       "reduce_scatter", array, out)
        return out

    def barrier(self, untimed: bool = False):
        self._enter("barrier")
        if untimed:
            self.comm.Barrier()
        else:
            self._wait(self.comm.Ibarrier(), "barrier")

    def untimed(self, op: str):
        """The collective `op` in its untimed form (see above), for a progress engine."""
        if op not in _COLLECTIVES:
            raise KeyError(op)
        # this class's own form: a subclass's override (a persistent allreduce) has its own
        return functools.partial(getattr(MPICommunicator, op), self, untimed=True)

    def bcast_bytes(self, data: bytes | None, root: int = 0) -> bytes:
        """Broadcast raw bytes (length first, then the buffer): no pickle."""
        n = np.array([len(data) if self.rank == root else 0], dtype=np.int64)
        self.broadcast(n, root)
        buf = np.frombuffer(data, dtype=np.uint8).copy() if self.rank == root else np.empty(
            int(n[0]), dtype=np.uint8)
        self.broadcast(buf, root)
        return buf.tobytes()
