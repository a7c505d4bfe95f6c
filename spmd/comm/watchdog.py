"""The watchdog: one per communicator, the only judge of how long a wait on it may last and of
what a wait that never ends reports.

Every wait on a communicator registers with its watchdog for as long as it lasts, whatever its
form: a blocking collective polled on the caller's thread (MPI's posted requests, NCCL's
events: `poll`), a collective run on the caller's thread inside a call that cannot be
interrupted (a progress engine's `overlap=False`: `run`), the result of one queued on the
communication thread (an async or bucketed handle, several waited at once: `result`), a wait
that times out by itself with the timeout it is given (the places of a LocalGroup:
`bounded`).
`watching()` says what it watches now. The watchdog alone decides, with one check for all of
them (`_check`):

- the deadline: the collective timeout (`timeout_s`: the communicator's, else
  SPMD_COLLECTIVE_TIMEOUT) from the wait's start. A polled wait past it raises
  CommunicationError (recoverable: MPI keeps the request posted, NCCL aborts its
  communicator); a wait inside an uninterruptible call, given GRACE_S more (so a backend that
  times out by itself raises first), ends the job, since the thread in it can never leave it;
- a peer's departure (spmd.guard's news, through spmd/events.py): a peer that left before
  joining this collective fails the wait the same two ways;
- the hang report: `[rank r/n] <op> ... did not complete within T s: <which ranks never
  arrived>` (the arrival board, comm/arrivals.py), and, for a wait longer than NOTE_AFTER_S,
  `wait <op>` in paddle-launch's status file (SPMD_STATUS_FILE), and `done <op>` once it
  completed, so its failure report can say which op each rank was waiting in.

A job-ending wait writes its report on stderr and ends the job: under paddle-launch it records
the error and exits, so the launcher can still ask the other ranks where they wait; otherwise
MPI_Abort (through the guard) ends every rank.

One wait is not a communicator's, so no watchdog's: MPI's own start-up (comm/mpi.py's
init_mpi_within), before any communicator exists. It is bounded by the same collective
timeout and stops, like a watched wait, when the guard hears that a peer died.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from .. import events
from ..errors import CommunicationError
from ..flags import flags

# How much longer than the collective timeout a wait that cannot be interrupted lasts before
# the job ends: a backend that times out by itself (threads in a LocalGroup, MPI's polled
# waits) then raises its CommunicationError first, and the job ends only for a call that
# cannot time out.
GRACE_S = 2.0
NOTE_AFTER_S = 0.1  # a wait this long goes into the status file; shorter ones cost nothing
SPIN_S = 0.002  # a polled wait spins this long before it sleeps: short collectives end in it
NAP_S = 0.0002  # a polled wait's sleep between two tests, after the spin
BLOCKING, AT_ONCE, ASYNC = "blocking", "at once", "async"  # the forms of a wait


class Wait:
    """One wait the watchdog watches: `op` (as the hang report names it), `form` (BLOCKING,
    AT_ONCE or ASYNC), `waiter` (the communicator, or the part of one, that waits: its
    describe() and missing() speak in the report), `began` (time.time())."""

    __slots__ = ("op", "form", "waiter", "began", "since", "timeout", "deadline", "ends_job",
                 "names_step", "give_up", "noted")

    def __init__(self, op: str, form: str, waiter, timeout: float, ends_job: bool,
                 names_step: bool = False, give_up=None):
        self.op, self.form, self.waiter = op, form, waiter
        self.began, self.since = time.time(), time.monotonic()
        self.timeout, self.ends_job = timeout, ends_job
        self.deadline = self.since + timeout + (GRACE_S if ends_job else 0.0)
        self.names_step, self.give_up = names_step, give_up
        self.noted = None  # the status file this wait's `wait` event went to

    def __repr__(self) -> str:
        return f"{self.waiter.describe()} waits in {self.op} ({self.form})"


class Watchdog:
    """The watcher of one communicator's waits (see the module doc). `timeout_s` may be
    changed at any time; a wait takes the value it finds when it begins."""

    def __init__(self, comm, timeout_s: float | None = None):
        self.communicator = comm
        self.timeout_s = flags().collective_timeout_s if timeout_s is None else timeout_s
        self._waits: list[Wait] = []
        self._lock = threading.Lock()
        self._monitor: threading.Event | None = None  # set: the monitor thread stops

    def watching(self) -> list[Wait]:
        """The waits in progress on this communicator now, oldest first."""
        with self._lock:
            return list(self._waits)

    # -- the three ways to wait ---------------------------------------------------------------
    def poll(self, op: str, done, waiter=None, names_step: bool = False, give_up=None,
             form: str = BLOCKING) -> None:
        """Until `done()`, on this thread (it spins a moment, then naps between tests). Past
        the timeout, or when a peer left before joining `op`: `give_up()` (if given), then
        CommunicationError; the caller decides what stays of the collective. `names_step`:
        the report names the Executor.run it waited in."""
        wait = self._begin(op, form, waiter, False, names_step, give_up)
        try:
            while not done():
                now = time.monotonic()
                self._check(wait, now)
                if now > wait.since + SPIN_S:
                    time.sleep(NAP_S)
        except BaseException:
            self._end(wait, completed=False)
            raise
        self._end(wait)

    def run(self, op: str, call, args: tuple = (), waiter=None):
        """`call(*args)` on this thread, which cannot leave it (MPI): the watchdog's monitor
        thread watches it and ends the job past the timeout or at a departure."""
        wait = self._begin(op, AT_ONCE, waiter, True, names_step=True)
        if self._monitor is None:
            self._start_monitor()
        try:
            result = call(*args)
        except BaseException:
            self._end(wait, completed=False)
            raise
        self._end(wait)
        return result

    def result(self, op: str, future, waiter=None):
        """`future`'s result (a collective queued on the communication thread), waited for on
        this thread; the job ends past the timeout or at a departure (the communication
        thread is in a call that cannot be interrupted)."""
        wait = self._begin(op, ASYNC, waiter, True, names_step=True)
        try:
            while not future.wait(min(NOTE_AFTER_S, max(0.0, wait.deadline - time.monotonic()))):
                self._check(wait, time.monotonic())
            result = future.result()
        except BaseException:
            self._end(wait, completed=False)
            raise
        self._end(wait)
        return result

    @contextlib.contextmanager
    def bounded(self, op: str, waiter=None):
        """A wait that times out by itself (a threading.Barrier's), registered while it lasts;
        yields its Wait, whose `timeout` is how long it may last."""
        wait = self._begin(op, BLOCKING, waiter, False)
        try:
            yield wait
        except BaseException:
            self._end(wait, completed=False)
            raise
        self._end(wait)

    def close(self) -> None:
        """Stop the monitor thread (the communicator's owner is gone; a later `run` starts
        another)."""
        if self._monitor is not None:
            self._monitor.set()
            self._monitor = None

    # -- what it decides ----------------------------------------------------------------------
    def hang_report(self, wait: Wait) -> str:
        """What a wait past its deadline says: the rank, the op (and the Executor.run it is
        in), the timeout, and which ranks never arrived where the backend can tell."""
        missing = wait.waiter.missing() or "another rank never reached it"
        step = f" (in Executor.run #{events.supervision.steps()})" if wait.names_step else ""
        return (f"{wait.waiter.describe()} {wait.op}{step} did not complete within "
                f"{wait.timeout:g} s: {missing} (crashed, hung, or runs a different program)")

    def _check(self, wait: Wait, now: float) -> None:
        """The one decision, for every wait, on whichever thread watches it: a departed peer,
        the deadline, and the status file's note of a long wait."""
        gone = events.supervision.departure_message(wait.op, wait.waiter.describe())
        if gone:
            if wait.ends_job:
                departed(gone)
            if wait.give_up is not None:
                wait.give_up()
            events.supervision.let_the_reporter_speak()
            raise CommunicationError(gone)
        if now > wait.deadline:
            report = self.hang_report(wait)
            if wait.ends_job:
                timed_out(report)
            if wait.give_up is not None:
                wait.give_up()
            raise CommunicationError(f"{report}; raise SPMD_COLLECTIVE_TIMEOUT if a step is "
                                     f"legitimately slower")
        if wait.noted is None and now > wait.since + NOTE_AFTER_S:
            path = flags().status_file or ""
            with self._lock:
                if path and wait in self._waits:  # stamped with when the wait began
                    _append(path, "wait", wait.op, wait.began)
                wait.noted = path

    def _begin(self, op, form, waiter, ends_job, names_step=False, give_up=None) -> Wait:
        wait = Wait(op, form, self.communicator if waiter is None else waiter, self.timeout_s,
                    ends_job, names_step, give_up)
        with self._lock:
            self._waits.append(wait)
        return wait

    def _end(self, wait: Wait, completed: bool = True) -> None:
        """`wait` is over. One that failed stays open in the status file (no `done`): the
        launcher's report says the rank was waiting in its op when it failed."""
        with self._lock:
            self._waits.remove(wait)
            if wait.noted and completed:
                _append(wait.noted, "done", wait.op)

    def _start_monitor(self) -> None:
        stop = self._monitor = threading.Event()
        threading.Thread(target=self._watch, args=(stop,), name="spmd-comm-watchdog",
                         daemon=True).start()

    def _watch(self, stop: threading.Event) -> None:
        """The monitor thread: checks the waits whose thread is inside an uninterruptible call
        (every 0.1 s where a supervisor tells of departures, else every second)."""
        while not stop.wait(0.1 if events.supervision.supervised() else 1.0):
            now = time.monotonic()
            for wait in self.watching():
                if wait.form == AT_ONCE:
                    self._check(wait, now)


def _append(path: str, event: str, detail: str, when: float | None = None) -> None:
    from ..status_file import append_event

    append_event(path, event, detail, when=when)


def timed_out(report: str) -> None:
    """A wait inside an uninterruptible call outlived the timeout: say so on stderr and end
    the job."""
    sys.stderr.write(report + "; ending the job. Raise SPMD_COLLECTIVE_TIMEOUT if a step is "
                     "legitimately slower.\n")
    sys.stderr.flush()
    _end_job(report)


def departed(message: str) -> None:
    """A peer left while this rank waits, inside an uninterruptible call, in a collective the
    peer never joined."""
    events.supervision.let_the_reporter_speak()
    sys.stderr.write(message + "; ending the job.\n")
    sys.stderr.flush()
    _end_job(message)


def _end_job(message: str) -> None:
    """Under paddle-launch: record the error and exit, so the launcher can still ask the other
    ranks for their stacks before it stops them. Otherwise MPI_Abort ends every rank."""
    try:
        path = flags().status_file
        if path:
            _append(path, "error", f"CommunicationError: {message}")
        else:
            events.supervision.abort_job(1)
    finally:
        os._exit(1)
