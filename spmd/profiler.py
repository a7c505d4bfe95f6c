"""fluid.profiler: time every op and every run while profiling is on, then print fluid's
summary table and write a Chrome-trace file (chrome://tracing, Perfetto) per rank (both made
from the recorded events by profiler_report.py, whose names this module re-exports).

The executor's plan asks `active()` once per run; with profiling off that is the whole cost.
comm's progress engines ask it once per collective issued or waited for, and while profiling
record each collective's issue and wait (on the executor's thread) and its run (on the engine's
thread) beside the ops: the 'comm issue', 'comm wait' and 'comm run' tracks of the trace.

Each rank's trace also records, in `otherData.spmd`, its rank, the job size, the host, the
launcher's job id (where the launcher sets one) and a clock anchor: time.perf_counter_ns (the
clock events are stamped with, comparable only within a host) read together with time.time_ns
(the wall clock). `python -m spmd.timeline merge` puts every rank's events on one clock with it.

On a GPU, kernels only queue work, so a time stamp taken right after one measures its launch.
While profiling, every stamp (`now_ns`) therefore first waits for the device's queued work when
a GPU is in use, so each op's event covers its execution. "In use" is the place the plan names
(`Recorder.use_place`) or, when none was named, a GPU that cupy sees once something has imported
cupy (only GPU places do); cupy is never imported here for host places. The waits make a
profiled run slower than an unprofiled one on a GPU, as fluid's GPU profiling does.

>>> import spmd.fluid.profiler as profiler
>>> with profiler.profiler("CPU", "total", "/tmp/profile"):
...     pass  # exe.run(...) steps here are timed
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
import warnings

from . import events
from .errors import InvalidArgumentError

# the summary table and the trace file: spmd.profiler's names, written in profiler_report.py
from .profiler_report import (  # noqa: F401 - re-exported
    COMM_TIDS,
    RUN_EVENTS,
    TRACE_FORMAT,
    job_id,
    report,
    summarize,
    write_chrome_trace,
)

__all__ = ["cuda_profiler", "device_synchronizer", "reset_profiler", "profiler",
           "start_profiler", "stop_profiler"]

_STATES = ("CPU", "GPU", "All")
_TRACER_OPTIONS = ("Default", "OpDetail", "AllOpDetail")
_SORT_KEYS = (None, "calls", "total", "max", "min", "ave")


def device_synchronizer(place=None):
    """The function that waits until the GPU has finished its queued work, or None where no
    GPU is in use. `place`: a CUDAPlace gives its device; a host place gives None; None gives
    the current device when cupy is already imported and sees a GPU, else None. cupy is
    imported only for a GPU place.

    >>> from spmd.core.places import CPUPlace
    >>> device_synchronizer(CPUPlace()) is None
    True
    """
    if place is not None:
        if not getattr(place, "is_gpu", False):
            return None
        import cupy

        return cupy.cuda.Device(place.device_id).synchronize
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # noqa: BLE001 - cupy without a usable driver: nothing to wait for
        return None
    return cupy.cuda.Device().synchronize


_UNSET = object()


def clock_anchor(samples: int = 5) -> dict:
    """time.perf_counter_ns and time.time_ns read together: the perf_counter stamp in the
    middle of the tightest of `samples` brackets (a preemption between the reads makes a
    bracket wide), the wall time read inside it, and half the bracket as the uncertainty.

    >>> anchor = clock_anchor(); anchor["uncertainty_ns"] >= 0
    True
    """
    best = None
    for _ in range(samples):
        before = time.perf_counter_ns()
        wall = time.time_ns()
        after = time.perf_counter_ns()
        if best is None or after - before < best[0]:
            best = (after - before, (before + after) // 2, wall)
    return {"perf_ns": best[1], "wall_ns": best[2], "uncertainty_ns": (best[0] + 1) // 2}


class Recorder:
    """Timed events of one profiling session: (name, thread, start ns, end ns).

    `synchronize` is what `now_ns` calls before each stamp (a device wait, see
    `device_synchronizer`), or None; `use_place` sets it for the calling thread's place (each
    thread of a multi-place executor runs its own place).
    """

    def __init__(self, state: str):
        self.state = state
        self.events: list[tuple[str, int, int, int]] = []
        # collectives, kept apart from the ops (fluid's summary table has ops only):
        # (kind: issue/wait/run, name, track, start ns, end ns, args)
        self.comm_events: list[tuple[str, str, int, int, int, dict]] = []
        self.clock = clock_anchor()  # perf_counter -> wall clock, for spmd.timeline
        self.clock_at_stop: dict | None = None
        self._threads: dict[int, int] = {}
        self._engines: dict[int, tuple[int, object]] = {}  # id -> (track, the engine)
        self._lock = threading.Lock()
        self._auto = _UNSET  # the current device's wait, decided at the first stamp
        self._by_thread: dict[int, object] = {}  # thread -> wait for the place it named

    @property
    def synchronize(self):
        """The device wait done before each time stamp by the calling thread, or None."""
        sync = self._by_thread.get(threading.get_ident(), _UNSET)
        if sync is not _UNSET:
            return sync
        sync = self._auto
        if sync is _UNSET:
            # cupy's current device is per thread, so one answer serves every thread
            sync = device_synchronizer()
            # until something imports cupy no GPU is in use; decide again at the next stamp
            if sync is not None or "cupy" in sys.modules:
                self._auto = sync
        return sync

    def use_place(self, place) -> None:
        """Time the ops this thread runs on `place`: wait for its device before each stamp
        (GPU places), or never (host places).

        >>> from spmd.core.places import CPUPlace
        >>> rec = Recorder("All"); rec.use_place(CPUPlace()); rec.synchronize is None
        True
        """
        self._by_thread[threading.get_ident()] = device_synchronizer(place)

    def thread_index(self) -> int:
        """fluid's `threadN::` prefix: threads numbered in the order they first record."""
        ident = threading.get_ident()
        index = self._threads.get(ident)
        if index is None:
            with self._lock:
                index = self._threads.setdefault(ident, len(self._threads))
        return index

    def record(self, name: str, start_ns: int, end_ns: int, thread: int | None = None):
        """Add one timed event (perf_counter_ns stamps) on `thread` (default: the caller's)."""
        thread = self.thread_index() if thread is None else thread
        self.events.append((name, thread, start_ns, end_ns))  # list.append is atomic

    def record_comm(self, kind: str, name: str, start_ns: int, end_ns: int, args: dict,
                    engine=None) -> None:
        """Add one collective event (perf_counter_ns stamps): kind 'issue' or 'wait' on the
        calling thread's track, 'run' on the track of `engine` (the progress engine that ran
        it, wherever it ran it)."""
        if kind == "run":
            known = self._engines.get(id(engine))
            if known is None:
                with self._lock:  # the engine is kept: a freed one's id may name a new one
                    known = self._engines.setdefault(id(engine), (len(self._engines), engine))
            track = known[0]
        else:
            track = self.thread_index()
        self.comm_events.append((kind, name, track, start_ns, end_ns, args))

    def reset(self):
        """Forget the events so far (reset_profiler)."""
        self.events = []
        self.comm_events = []


_active: Recorder | None = None  # also events.profiling.recorder, which comm reads


def active() -> Recorder | None:
    """The recorder of the running profiling session, or None when profiling is off."""
    return _active


def now_ns() -> int:
    """The clock events are stamped with: time.perf_counter_ns, taken after the GPU in use
    (if any) has finished its queued work, so that a GPU op's event is its execution time.

    >>> now_ns() > 0
    True
    """
    rec = _active
    if rec is not None:
        sync = rec.synchronize
        if sync is not None:
            sync()
    return time.perf_counter_ns()


def _check_choice(what: str, value, allowed):
    if value not in allowed:
        raise InvalidArgumentError(
            f"{what} must be one of {list(allowed)}, got {value!r}")


def start_profiler(state: str, tracer_option: str = "Default") -> None:
    """Start timing ops and runs (fluid.profiler.start_profiler); a second start while one is
    running does nothing, as in fluid.

    `state` is 'CPU', 'GPU' or 'All' (on CPU places all three time the same host-side events);
    `tracer_option` is 'Default', 'OpDetail' or 'AllOpDetail' (the report is per op type).

    >>> start_profiler("CPU"); stop_profiler("total", "/tmp/profile")  # doctest: +SKIP
    """
    global _active
    if _active is not None:
        return
    _check_choice("state", state, _STATES)
    _check_choice("tracer_option", tracer_option, _TRACER_OPTIONS)
    _active = Recorder(state)
    events.profiling.recorder = _active


def reset_profiler() -> None:
    """Forget the events timed so far (fluid.profiler.reset_profiler), e.g. warm-up steps.

    >>> reset_profiler()
    """
    if _active is not None:
        _active.reset()


def stop_profiler(sorted_key: str | None = None, profile_path: str = "/tmp/profile") -> None:
    """Stop timing, print the summary table sorted by `sorted_key` (None: first end time,
    'calls', 'total', 'max', 'min', 'ave') and write the Chrome trace to `profile_path`
    (`<profile_path>.rank<r>` when the job has several ranks). Does nothing when not started.

    >>> stop_profiler()  # not started: nothing happens
    """
    global _active
    if _active is None:
        return
    _check_choice("sorted_key", sorted_key, _SORT_KEYS)
    recorder, _active = _active, None
    events.profiling.recorder = None
    recorder.clock_at_stop = clock_anchor()
    from .comm.topology import detect

    topology = detect()
    print(report(recorder, sorted_key, topology), flush=True)
    path = profile_path if topology.size == 1 else f"{profile_path}.rank{topology.rank}"
    write_chrome_trace(recorder, path, topology.rank, topology.size)


@contextlib.contextmanager
def profiler(state: str, sorted_key: str | None = None, profile_path: str = "/tmp/profile",
             tracer_option: str = "Default"):
    """Profile the steps run inside the block (fluid.profiler.profiler): start_profiler on
    entry, stop_profiler(sorted_key, profile_path) on exit.

    >>> with profiler("CPU", "total", "/tmp/profile"):
    ...     pass
    """
    start_profiler(state, tracer_option)
    try:
        yield
    finally:
        stop_profiler(sorted_key, profile_path)


_cuda_note_given = False


@contextlib.contextmanager
def cuda_profiler(output_file: str, output_mode: str | None = None, config=None):
    """fluid.profiler.cuda_profiler: on a GPU, the block runs between cudaProfilerStart and
    cudaProfilerStop (run the job under nvprof / nsys to collect, as with fluid); without a
    GPU it is accepted and does nothing, saying so once.

    >>> with cuda_profiler("cuda_profile.txt", "csv"):
    ...     pass
    """
    output_mode = "csv" if output_mode is None else output_mode
    _check_choice("output_mode", output_mode, ("kvp", "csv"))
    from .core.places import is_compiled_with_cuda

    if not is_compiled_with_cuda():
        global _cuda_note_given
        if not _cuda_note_given:
            _cuda_note_given = True
            warnings.warn("fluid.profiler.cuda_profiler: no CUDA device here, so nothing is "
                          f"profiled and {output_file!r} is not written; use "
                          "fluid.profiler.profiler('CPU') for host timings", stacklevel=3)
        yield
        return
    from cupy.cuda import profiler as nvtx_profiler

    nvtx_profiler.start()
    try:
        yield
    finally:
        nvtx_profiler.stop()
