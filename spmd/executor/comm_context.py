"""What a collective kernel talks to (attrs["_comm"]): one place's communicator, and the thread
that runs its collectives so communication overlaps the rest of the backward pass.

All collectives of a context run on one thread in the order the program issues them, which is
the same on every rank, so ranks never disagree about which collective comes next. That thread
uses the communicator's fastest blocking calls; a kernel returns at once, and `wait_all` (the
c_sync_comm_stream op, and the end of every run) waits with the collective timeout and raises a
CommunicationError naming the rank and the op when one does not complete in time.

A collective with nothing to overlap (the passes mark it `use_calc_stream`: no compute op lies
between it and its wait) runs inline on the calling thread instead, after the ones before it,
sparing two thread hand-offs. A watchdog ends the job if an inline collective outlives the
timeout, printing the rank and the op: a blocking MPI call cannot be interrupted any other way.
"""
from __future__ import annotations

import concurrent.futures
import functools
import os
import queue
import sys
import threading
import time

from .. import guard
from ..comm.base import Communicator, SelfCommunicator
from ..errors import CommunicationError, InvalidArgumentError
from ..flags import flags


class _Worker:
    """One daemon thread running submitted calls in order. A daemon, so a collective stuck past
    its timeout (the job is being torn down) never keeps the interpreter from exiting."""

    def __init__(self, name: str):
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, *args) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((future, fn, args))
        return future

    def _loop(self):
        while True:
            future, fn, args = self._queue.get()
            if fn is None:
                return
            try:
                future.set_result(fn(*args))
            except BaseException as e:  # noqa: BLE001 - handed to the waiter
                future.set_exception(e)

    def stop(self):
        self._queue.put((None, None, None))


def _into(out, result):
    if out is None:
        return result
    out[...] = result
    return out


def _call_into(call, out, *args):
    out[...] = call(*args)
    return out


def _status(event: str, detail: str = "", when: float | None = None):
    """Tell paddle-launch (when it started this worker) which collective this rank waits in."""
    status_file = flags().status_file
    if status_file:
        from ..run import append_event

        append_event(status_file, event, detail, when=when)


class _Watchdog:
    """Ends the job when an inline collective runs past the timeout (see module doc), and
    records a long wait for the launcher's report."""

    def __init__(self, comm: Communicator):
        self._comm = comm
        self.op: str | None = None
        self.began = 0.0  # time.time() when the current op started
        self.deadline = 0.0
        self.stopped = False
        threading.Thread(target=self._loop, name="spmd-comm-watchdog", daemon=True).start()

    def _loop(self):
        noted = None
        while not self.stopped:
            time.sleep(0.1 if guard.supervised() else 1.0)
            op, began, deadline = self.op, self.began, self.deadline
            departed = op is not None and guard.departure_message(op, self._comm.describe())
            if departed:
                _departed(departed)
            if op is None:
                if noted is not None:
                    _status("done", noted)
                noted = None
                continue
            if noted != op:
                _status("wait", op, when=began)
                noted = op
            if time.monotonic() > deadline:
                _timed_out(self._comm, op, flags().collective_timeout_s)


def _timed_out(comm: Communicator, op: str, timeout: float):
    """A collective outlived the timeout: say so on stderr and end the job."""
    missing = comm.missing() or "another rank never reached it"
    message = (f"{comm.describe()} {op} did not complete within {timeout:g} s: {missing} "
               f"(crashed, hung, or runs a different program)")
    sys.stderr.write(message + "; ending the job. Raise SPMD_COLLECTIVE_TIMEOUT if a step is "
                     "legitimately slower.\n")
    sys.stderr.flush()
    _end_job(message)


def _departed(message: str):
    """A peer left while this rank waits in a blocking collective it never joined."""
    guard.let_the_reporter_speak()
    sys.stderr.write(message + "; ending the job.\n")
    sys.stderr.flush()
    _end_job(message)


def _end_job(message: str):
    """Under paddle-launch: record the error and exit, so the launcher can still ask the other
    ranks for their stacks before it stops them. Otherwise MPI_Abort ends every rank."""
    try:
        if flags().status_file:
            _status("error", f"CommunicationError: {message}")
        else:
            guard.abort_job(1)
    finally:
        os._exit(1)


def _wait_noting(future, op: str, deadline: float, comm: Communicator):
    """future.result() until `deadline`; a wait longer than 0.1 s is recorded for the launcher
    (the op this rank is stuck in, if it never completes). A peer that left the job before
    this collective ends the job (the thread in MPI cannot be interrupted)."""
    try:
        return future.result(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
    except concurrent.futures.TimeoutError:
        if time.monotonic() >= deadline:
            raise
    _status("wait", op, when=time.time() - 0.1)
    while True:
        try:
            result = future.result(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
            break
        except concurrent.futures.TimeoutError:
            departed = guard.departure_message(op, comm.describe())
            if departed:
                _departed(departed)
            if time.monotonic() >= deadline:
                raise
    _status("done", op)
    return result


class CommContext:
    def __init__(self, make_comm, overlap: bool = True, name: str = "spmd-comm"):
        """`make_comm()` builds the communicator on first use (MPI and NCCL are not touched by
        programs that never communicate)."""
        self._make_comm = make_comm
        self._comm: Communicator | None = None
        self._overlap = overlap
        self._name = name
        self._worker: _Worker | None = None
        self._pending: list[tuple[concurrent.futures.Future, str]] = []
        self._lock = threading.RLock()
        self._watchdog: _Watchdog | None = None
        self._untimed: dict = {}  # op -> the communicator's blocking call, looked up once
        self._timeout = flags().collective_timeout_s

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

    def _run(self, op: str, *args, inline: bool = False, out=None):
        """Run `op` now (inline, or where nothing overlaps: its result is returned) or queue it
        on the communication thread (the buffer is filled in by wait_all). For an op whose
        result is a new array, `out` receives it, now or by wait_all."""
        comm = self.comm
        if not self._overlap or isinstance(comm, SelfCommunicator):
            return _into(out, getattr(comm, op)(*args))  # timed by the communicator itself
        call = self._untimed.get(op)
        if call is None:
            call = self._untimed[op] = comm.untimed(op)
        if out is not None:
            call = functools.partial(_call_into, call, out)
        if inline:
            if self._pending:
                self.wait_all()  # the ones issued before go first, as on every rank
            watchdog = self._watchdog
            if watchdog is None:
                watchdog = self._watchdog = _Watchdog(comm)
            watchdog.deadline = time.monotonic() + self._timeout
            watchdog.began = time.time()
            watchdog.op = op
            try:
                return call(*args)
            finally:
                watchdog.op = None
        with self._lock:
            if self._worker is None:
                self._worker = _Worker(self._name)
            self._pending.append((self._worker.submit(call, *args), op))
        return out

    def allreduce(self, buf, inline: bool = False, reduction: str = "sum"):
        self._run("allreduce", buf, reduction, inline=inline)

    def reduce(self, buf, root: int, inline: bool = False, reduction: str = "sum"):
        self._run("reduce", buf, root, reduction, inline=inline)

    def broadcast(self, buf, root: int, inline: bool = False):
        self._run("broadcast", buf, root, inline=inline)

    def reduce_scatter(self, buf, out=None):
        """This rank's section of the sum over ranks of `buf`, now; or, given `out`, queued on
        the communication thread and written into `out` by wait_all (`buf` must stay as it
        is until then)."""
        return self._run("reduce_scatter", buf, inline=out is None, out=out)

    def allgather(self, buf):
        return self._run("allgather", buf, inline=True)

    def wait_all(self):
        """Wait for every collective issued so far, at most the collective timeout; re-raise the
        first failure."""
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return
        timeout = self._timeout
        deadline = time.monotonic() + timeout
        error = None
        for future, op in pending:
            try:
                _wait_noting(future, op, deadline, self.comm)
            except concurrent.futures.TimeoutError:
                # the communication thread is stuck inside MPI and cannot be interrupted: end
                # the job, as the inline watchdog does, rather than leave the process half-dead
                _timed_out(self.comm, op, timeout)
            except Exception as e:  # noqa: BLE001 - keep waiting for the rest, then raise
                error = error or e
        if error is not None:
            if isinstance(error, CommunicationError):
                raise error
            raise CommunicationError(
                f"{self.comm.describe()} collective failed: {error}") from error

    def close(self):
        """End this context's threads (its runner is gone)."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        if self._watchdog is not None:
            self._watchdog.stopped = True
            self._watchdog = None


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


def is_world_context(ctx) -> bool:
    """Whether `ctx` is one of the process's shared world contexts (which no runner closes)."""
    return any(ctx is world for world in _world_contexts.values())


def _make_world_comm(place) -> Communicator:
    from ..comm.topology import detect

    topology = detect()
    if topology.size == 1:
        return SelfCommunicator()
    from ..comm.mpi import MPICommunicator

    mpi = MPICommunicator()
    if not place.is_gpu:
        mpi.track_arrivals()
        return mpi
    if _gpus_shared(place.device_id, mpi):
        from ..comm.staged import HostStagedCommunicator

        mpi.track_arrivals()
        return HostStagedCommunicator(mpi)
    from ..comm.nccl import NCCLCommunicator

    return NCCLCommunicator(place.device_id, mpi)


def _gpus_shared(device_id: int, mpi) -> bool:
    """NCCL needs one rank per GPU: when two ranks of a node use the same device (by PCI bus
    id, so per-rank CUDA_VISIBLE_DEVICES count right), or SPMD_GPU_COMM=mpi, GPU arrays go
    through MPI, staged in host memory. Decided for the whole job at once."""
    import cupy

    from ..comm.topology import same_key_on_a_node

    # the flag goes into the collective too: every rank takes the same path whatever it sees
    return same_key_on_a_node(mpi.comm, cupy.cuda.runtime.deviceGetPCIBusId(device_id),
                              force=flags().gpu_comm == "mpi")
