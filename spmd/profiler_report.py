"""What a profiling session leaves (spmd/profiler.py): fluid's summary table, printed when
profiling stops, and the Chrome-trace file (chrome://tracing, Perfetto) each rank writes, with
what `python -m spmd.timeline merge` needs to put every rank's events on one clock.

Reads a Recorder's events only; spmd.profiler re-exports every name here.
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .profiler import Recorder

_SORT_TEXT = {
    None: "Sorted by event first end time in descending order in the same thread",
    "calls": "Sorted by number of calls in descending order in the same thread",
    "total": "Sorted by total time in descending order in the same thread",
    "max": "Sorted by number of max in descending order in the same thread",
    "min": "Sorted by number of min in descending order in the same thread",
    "ave": "Sorted by number of avg in descending order in the same thread",
}
# events that are whole runs, not ops: reported in their own table
RUN_EVENTS = ("Executor::Run", "ParallelExecutor::Run")
# what a trace file says it is (spmd.timeline reads this version)
TRACE_FORMAT = "spmd-profile/1"
# trace thread ids: ops keep their thread's number; the comm tracks of thread (or engine) i
# are these bases + i
COMM_TIDS = {"issue": 1000, "wait": 2000, "run": 3000}
# launcher variables naming the job (every rank of one job sees the same values)
_JOB_VARS = (("SLURM_JOB_ID", "SLURM_STEP_ID"), ("PMIX_NAMESPACE",),
             ("OMPI_MCA_ess_base_jobid",), ("PBS_JOBID",), ("LSB_JOBID",))


def job_id(env=None) -> str | None:
    """The launcher's id of this job (SLURM job.step, PMIx namespace, Open MPI job, PBS, LSF),
    or None where the launcher sets none (MPICH's mpiexec)."""
    env = os.environ if env is None else env
    for names in _JOB_VARS:
        if env.get(names[0]):
            return f"{names[0]}=" + ".".join(env.get(n, "") for n in names)
    return None


def summarize(recorder: Recorder, sorted_key: str | None = None) -> list[dict]:
    """Rows of the summary: one per (thread, event name) with calls, total, min, max, ave
    (milliseconds) and ratio (of the total of its table: ops or runs), in report order."""
    stats: dict[tuple[int, str], dict] = {}
    for order, (name, thread, start, end) in enumerate(
            sorted(recorder.events, key=lambda e: e[3])):
        ms = (end - start) / 1e6
        row = stats.get((thread, name))
        if row is None:
            row = stats[(thread, name)] = {"event": f"thread{thread}::{name}", "name": name,
                                           "thread": thread, "calls": 0, "total": 0.0,
                                           "min": ms, "max": ms, "first_end": order}
        row["calls"] += 1
        row["total"] += ms
        row["min"], row["max"] = min(row["min"], ms), max(row["max"], ms)
    rows = list(stats.values())
    for row in rows:
        row["ave"] = row["total"] / row["calls"]
    for is_run in (False, True):
        group = [r for r in rows if (r["name"] in RUN_EVENTS) == is_run]
        whole = sum(r["total"] for r in group) or 1.0
        for r in group:
            r["ratio"] = r["total"] / whole
    if sorted_key is None:
        rows.sort(key=lambda r: (r["thread"], r["first_end"]))
    else:
        rows.sort(key=lambda r: (r["thread"], -r[sorted_key]))
    return rows


def _table(title: str, rows: list[dict]) -> list[str]:
    width = max([len(r["event"]) for r in rows] + [len("Event")]) + 4
    head = "Event".ljust(width) + "".join(
        c.ljust(12) for c in ("Calls", "Total", "Min.", "Max.", "Ave.", "Ratio."))
    lines = ["", f"{'-' * 25}{title.center(27)}{'-' * 25}", "", head]
    for r in rows:
        lines.append(r["event"].ljust(width) + str(r["calls"]).ljust(12) + "".join(
            f"{r[k]:<12.6g}" for k in ("total", "min", "max", "ave", "ratio")))
    return lines


def report(recorder: Recorder, sorted_key: str | None, topology=None) -> str:
    """fluid's profiling report: header, overview, the op/event table and the run table."""
    rows = summarize(recorder, sorted_key)
    ops = [r for r in rows if r["name"] not in RUN_EVENTS]
    runs = [r for r in rows if r["name"] in RUN_EVENTS]
    lines = ["", "------------------------->     Profiling Report     <-------------------------",
             "", f"Place: {'CPU' if recorder.state == 'CPU' else recorder.state}"]
    if topology is not None and topology.size > 1:
        lines.append(f"Rank: {topology.rank}/{topology.size}")
    lines += ["Time unit: ms", _SORT_TEXT[sorted_key]]
    run_total = sum(r["total"] for r in runs)
    op_total = sum(r["total"] for r in ops)
    if run_total:
        lines += ["", f"Total time: {run_total:.6g}",
                  f"  Computation time       Total: {op_total:<12.6g}"
                  f"Ratio: {100 * op_total / run_total:.6g}%",
                  f"  Framework overhead     Total: {max(run_total - op_total, 0):<12.6g}"
                  f"Ratio: {100 * max(run_total - op_total, 0) / run_total:.6g}%"]
    lines += _table("Event Summary", ops)
    if runs:
        lines += _table("Run Summary", runs)
    return "\n".join(lines)


def write_chrome_trace(recorder: Recorder, path: str, rank: int = 0, size: int = 1) -> None:
    """The events as Chrome's trace-event JSON (complete events, microseconds from the first
    event), ops on their thread's tid, collectives on the COMM_TIDS tracks; `otherData.spmd`
    holds what spmd.timeline needs to merge the ranks' files (see the module doc)."""
    comm = recorder.comm_events
    base = min([e[2] for e in recorder.events] + [e[3] for e in comm], default=0)
    events = [{"name": name, "cat": "run" if name in RUN_EVENTS else "op", "ph": "X",
               "ts": (start - base) / 1e3, "dur": (end - start) / 1e3, "pid": rank,
               "tid": thread} for name, thread, start, end in recorder.events]
    tracks = {str(t): {"kind": "ops", "index": t} for t in sorted({e[1] for e in recorder.events})}
    for kind, name, track, start, end, args in comm:
        tid = COMM_TIDS[kind] + track
        tracks.setdefault(str(tid), {"kind": f"comm {kind}", "index": track,
                                     "comm": args.get("comm", ""),
                                     "member": args.get("member", 0)})
        events.append({"name": name, "cat": f"comm {kind}", "ph": "X", "ts": (start - base) / 1e3,
                       "dur": (end - start) / 1e3, "pid": rank, "tid": tid, "args": args})
    import socket  # (here: a trace is written rarely, every start imports this module)

    meta = {"format": TRACE_FORMAT, "rank": rank, "size": size, "host": socket.gethostname(),
            "pid": os.getpid(), "job": job_id(), "base_perf_ns": base, "clock": recorder.clock,
            "clock_at_stop": recorder.clock_at_stop, "tracks": tracks}
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"spmd": meta}},
                  f)
