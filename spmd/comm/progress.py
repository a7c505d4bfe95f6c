"""Progress engines: where a communicator's async collectives run.

ThreadEngine (MPI, local threads, host-staged): one daemon thread per communicator runs the
collectives in the order they were issued (the same on every rank, so ranks never disagree
about which comes next), with the backend's fastest blocking calls, so communication overlaps
the rest of the backward pass. A collective issued with `overlap=False` (nothing left to
overlap: its result is needed now) runs on the caller's thread instead, after the ones before
it, sparing two thread hand-offs. ImmediateEngine runs everything at once (a world of one).
The NCCL engine (nccl.py) issues on a CUDA stream of its own and waits on events.

Every wait here is the communicator's watchdog's (comm/watchdog.py): a collective run on the
caller's thread (`Watchdog.run`) and a handle's result (`Watchdog.result`) register with it,
and it alone ends the job when one outlives the collective timeout (the thread in MPI cannot
be interrupted) or a peer left before joining it.
"""
from __future__ import annotations

import functools
import threading
import time

try:  # queue.SimpleQueue is this C type; taken from it directly, queue.py's imports are spared
    from _queue import SimpleQueue
except ImportError:  # not CPython
    from queue import SimpleQueue

from .. import events
from ..errors import CommunicationError
from .handles import DoneHandle, Handle


class _Future:
    """The result of one call on the communication thread: concurrent.futures.Future's
    result(timeout) / done(), without that package's import (and the logging it brings) at
    every start; result raises TimeoutError when the time runs out."""

    __slots__ = ("_done", "_result", "_error")

    def __init__(self):
        self._done = threading.Event()
        self._result = self._error = None

    def set_result(self, result) -> None:
        self._result = result
        self._done.set()

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float) -> bool:
        """Whether it completed within `timeout` seconds."""
        return self._done.wait(timeout)

    def result(self, timeout: float | None = None):
        if not self._done.wait(timeout):
            raise TimeoutError("the collective has not completed yet")
        if self._error is not None:
            raise self._error
        return self._result


class _Worker:
    """One daemon thread running submitted calls in order. A daemon, so a collective stuck past
    its timeout (the job is being torn down) never keeps the interpreter from exiting."""

    def __init__(self, name: str):
        self._queue = SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, *args) -> _Future:
        future = _Future()
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


def _call_into(call, out, *args):
    out[...] = call(*args)
    return out


class _QueuedHandle(Handle):
    def __init__(self, engine: ThreadEngine, future, op: str, out):
        self._engine, self._future, self.op, self.out = engine, future, op, out
        self.waited = False

    def wait(self):
        return self._engine.wait(self)

    def test(self) -> bool:
        return self._future.done()


class ThreadEngine:
    """Runs one communicator's async collectives on a thread of their own (see module doc)."""

    def __init__(self, comm, name: str = "spmd-comm"):
        self._comm = comm
        self._name = name
        self._worker: _Worker | None = None
        self._pending: list[_QueuedHandle] = []
        self._lock = threading.RLock()
        self._fast: dict = {}  # op -> the backend's fastest blocking call, looked up once

    def issue(self, op: str, args: tuple, overlap: bool, label: str | None = None,
              into=None, lands_in=None) -> Handle:
        """Start collective `op` (a blocking method's name) on `args`; with `into`, its result
        is written into that array. `lands_in`: the array the result will be in, when the
        caller knows it (the handle's `out` before completion)."""
        call = self._fast.get(op)
        if call is None:
            call = self._fast[op] = self._comm.untimed(op)
        if into is not None:
            call = functools.partial(_call_into, call, into)
        label = label or op
        rec = events.profiling.recorder  # profiling off: this read is all it costs
        if rec is None:
            return self._issue(call, args, overlap, label, lands_in)
        t0 = time.perf_counter_ns()
        info = trace_info(self._comm, args)
        handle = self._issue(_timed_run(call, rec, label, info, self), args, overlap, label,
                             lands_in)
        rec.record_comm("issue", label, t0, time.perf_counter_ns(), info)
        return handle

    def _issue(self, call, args: tuple, overlap: bool, label: str, lands_in) -> Handle:
        if not overlap:
            if self._pending:
                self.wait_all()  # the ones issued before go first, as on every rank
            return DoneHandle(self._comm.watchdog.run(label, call, args))
        with self._lock:
            if self._worker is None:
                self._worker = _Worker(self._name)
            handle = _QueuedHandle(self, self._worker.submit(call, *args), label, lands_in)
            self._pending.append(handle)
        return handle

    def wait(self, handle: _QueuedHandle):
        """`handle`'s result, under the communicator's watchdog (past the collective timeout
        the job ends: the communication thread is stuck in a call that cannot be
        interrupted)."""
        rec = events.profiling.recorder  # profiling: the wait is a 'comm wait' event
        t0 = 0 if rec is None else time.perf_counter_ns()
        try:
            return self._comm.watchdog.result(handle.op, handle._future)
        finally:
            handle.waited = True
            if rec is not None:
                rec.record_comm("wait", handle.op, t0, time.perf_counter_ns(), {})

    def wait_all(self) -> None:
        """Wait for every collective issued so far; re-raise the first failure."""
        with self._lock:
            pending, self._pending = self._pending, []
        error = None
        for handle in pending:
            if handle.waited:
                continue
            try:
                self.wait(handle)
            except Exception as e:  # noqa: BLE001 - keep waiting for the rest, then raise
                error = error or e
        if error is not None:
            if isinstance(error, CommunicationError):
                raise error
            raise CommunicationError(
                f"{self._comm.describe()} collective failed: {error}") from error

    def close(self) -> None:
        if self._worker is not None:
            self._worker.stop()
            self._worker = None


def trace_info(comm, args: tuple) -> dict:
    """What a profiled collective's events say of it: the communicator's kind, this process's
    member of it (a place of several in one process), how many processes it spans, bytes."""
    per_process = max(1, comm.size // comm.processes())
    array = args[0] if args else None
    return {"comm": type(comm).__name__, "member": comm.rank % per_process,
            "processes": comm.processes(), "bytes": int(getattr(array, "nbytes", 0))}


def _timed_run(call, rec, label: str, info: dict, engine):
    """`call` recording its run as a 'comm run' event of `engine`, on whichever thread runs it
    (the engine's own, or the caller's for overlap=False)."""
    def run(*args):
        t0 = time.perf_counter_ns()
        try:
            return call(*args)
        finally:
            rec.record_comm("run", label, t0, time.perf_counter_ns(), info, engine)
    return run


class ImmediateEngine:
    """Every collective runs at once on the caller's thread with the backend's own (timed)
    blocking call: for a world of one, and for backends with nothing to overlap."""

    def __init__(self, comm):
        self._comm = comm

    def issue(self, op: str, args: tuple, overlap: bool, label: str | None = None,
              into=None, lands_in=None) -> Handle:
        call = getattr(self._comm, op)
        rec = events.profiling.recorder  # profiling: issued and run at once, an event a track
        if rec is not None:
            t0 = time.perf_counter_ns()
            info = trace_info(self._comm, args)
            call = _timed_run(call, rec, label or op, info, self)
        result = call(*args)
        if rec is not None:
            rec.record_comm("issue", label or op, t0, time.perf_counter_ns(), info)
        if into is not None:
            into[...] = result
            result = into
        return DoneHandle(result)

    def wait_all(self) -> None:
        pass

    def close(self) -> None:
        pass
