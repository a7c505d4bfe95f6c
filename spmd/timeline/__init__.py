"""A merged timeline: every rank's profiler trace in one Chrome / Perfetto trace, on one clock.

    python -m spmd.timeline merge [--out timeline.json] [--force] TRACE...

TRACE is a trace file, a directory of <prefix>.rank<r> files, or the profile path given to
fluid.profiler (which writes <profile_path>.rank<r> on each rank of several, <profile_path>
from one process). The result opens in https://ui.perfetto.dev or chrome://tracing: one
process per rank ("rank r"), each with the tracks

- ops: every op and run the executor timed, as in the rank's own trace;
- comm issue: the executor's thread handing a collective to the progress engine (a collective
  issued with overlap=False runs there and then, so its issue spans its run);
- comm wait: the executor's thread blocked until issued collectives complete;
- comm run: the collective running on its communicator's progress engine (the MPI call).

A rank with several places has these per thread; one with several communicators, a comm run
track per communicator. NCCL collectives (GPU, their own CUDA stream) appear as their ops only.

The clock. Events are stamped with time.perf_counter_ns, which is a per-process clock in
general (on Linux it is CLOCK_MONOTONIC, shared by one host's processes, but not across hosts).
start_profiler reads perf_counter_ns and time.time_ns together (the tightest of a few brackets,
so a preemption between the reads is not mistaken for an offset) and the trace records the
pair; the merge places each rank's events on the wall clock by its pair, and measures the
merged trace in microseconds from the earliest event of any rank. This needs no communication
in the profiler (fluid.profiler may run on some ranks only) and:

- on one host, is exact to the pair's read: every process reads the same wall clock, and the
  wall and monotonic clocks tick at the same rate (NTP slews both), so one pair serves the
  whole profile. A step of the wall clock while profiling (the pair read again at
  stop_profiler disagrees) is reported;
- across hosts, is as good as the hosts' clock synchronization (NTP: usually well within a
  millisecond), and is then checked against the collectives: no rank can leave an allreduce,
  allgather, reduce-scatter or barrier over every rank before every rank entered it, so each
  one recorded on two hosts bounds the offset between their clocks. A host whose wall clock
  breaks those bounds is moved by the least amount that satisfies them all, and the merged
  trace says so (otherData.spmd_timeline.notes).

The merge refuses, with the files named, traces of different jobs (sizes or launcher job ids
that differ, a rank twice), a job with ranks missing or ranks whose profiled spans never
overlap (stale files of an earlier run; --force merges them anyway), and files that are not
spmd traces.

>>> import spmd.timeline as timeline
>>> # timeline.merge(["/tmp/profile"], out="timeline.json")  # after a profiled 2-rank run
"""
from __future__ import annotations

import json
import os

from .clock import Alignment, align
from .files import RankTrace, check_one_job, find_traces, load_trace
from .merge import merge_traces

__all__ = ["Alignment", "RankTrace", "align", "check_one_job", "find_traces", "load_trace",
           "merge", "merge_traces"]


def merge(paths, out: str | os.PathLike | None = None, force: bool = False) -> dict:
    """The merged trace of the traces `paths` name (files, directories, profile paths: see
    find_traces), written to `out` when given. InvalidArgumentError when they are not one
    job's traces (see check_one_job; `force` lets missing ranks and disjoint spans through).
    Notes on the clock are in the result's otherData.spmd_timeline.notes.

    >>> merge(["/nonexistent/profile"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spmd.errors.InvalidArgumentError: no trace at /nonexistent/profile: ...
    """
    traces = [load_trace(p) for p in find_traces(paths)]
    check_one_job(traces, force=force)
    merged = merge_traces(traces)
    if out is not None:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(merged, f)
    return merged
