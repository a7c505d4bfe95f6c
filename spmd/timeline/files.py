"""Finding and reading the per-rank traces fluid.profiler writes, and refusing a set that is
not one whole job: different sizes, job ids or runs, a rank twice or missing, not a trace.

>>> find_traces(["/nonexistent/profile"])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
spmd.errors.InvalidArgumentError: no trace at /nonexistent/profile: ...
"""
from __future__ import annotations

import glob
import json
import os
import re
import time
from dataclasses import dataclass, field

from ..errors import InvalidArgumentError
from ..profiler import TRACE_FORMAT

_RANK_FILE = re.compile(r"^(?P<prefix>.*)\.rank(?P<rank>\d+)$")
_HOW = ("fluid.profiler writes <profile_path> from one process and <profile_path>.rank<r> "
        "from each rank of several")
# ranks of one job profile at the same time; profiled spans further apart than this (more
# than two hosts' wall clocks disagree by) are from different runs
OVERLAP_SLACK_NS = 1_000_000_000


@dataclass
class RankTrace:
    """One rank's trace file: its events and what `otherData.spmd` says of it."""

    path: str
    rank: int
    size: int
    host: str
    job: str | None
    base_perf_ns: int  # the perf_counter_ns stamp of ts 0
    clock: dict  # {perf_ns, wall_ns, uncertainty_ns} read at start_profiler
    clock_at_stop: dict | None
    tracks: dict  # tid (str) -> {kind, index, comm}
    events: list = field(repr=False, default_factory=list)

    def wall_ns(self, perf_ns: int, clock: dict | None = None) -> int:
        """A perf_counter_ns stamp of this process as wall-clock ns (by the start anchor)."""
        clock = self.clock if clock is None else clock
        return perf_ns - clock["perf_ns"] + clock["wall_ns"]

    def span_ns(self) -> tuple[int, int]:
        """The profiled span in wall-clock ns: start_profiler to stop_profiler."""
        stop = self.clock_at_stop or self.clock
        return self.clock["wall_ns"], self.wall_ns(stop["perf_ns"])


def find_traces(paths) -> list[str]:
    """The trace files `paths` name: files as given; a directory: its <prefix>.rank<r> files
    (one prefix); a profile path (what the profiler was given): <path>.rank<r>, or <path>
    itself from one process. Each file once, in the order found."""
    found: list[str] = []
    for path in paths:
        found += _expand(os.fspath(path))
    if not found:
        raise InvalidArgumentError(f"no trace files named; {_HOW}")
    unique = {os.path.realpath(p): p for p in reversed(found)}
    return [p for p in found if unique.get(os.path.realpath(p)) is p]


def _by_rank(files) -> list[str]:
    return sorted(files, key=lambda p: int(_RANK_FILE.match(p)["rank"]))


def _expand(path: str) -> list[str]:
    if os.path.isdir(path):
        groups: dict[str, list[str]] = {}
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            match = _RANK_FILE.match(name)
            if match and os.path.isfile(full):
                groups.setdefault(match["prefix"], []).append(full)
        if not groups:
            raise InvalidArgumentError(
                f"{path} is a directory without per-rank traces (<prefix>.rank<r> files); "
                f"name the trace files, or the profile path the profiler was given ({_HOW})")
        if len(groups) > 1:
            names = ", ".join(f"{os.path.join(path, p)}.rank*" for p in groups)
            raise InvalidArgumentError(
                f"{path} holds the traces of {len(groups)} profiles ({names}); name one, "
                f"e.g. {os.path.join(path, next(iter(groups)))}")
        return _by_rank(next(iter(groups.values())))
    ranked = _by_rank(p for p in glob.glob(glob.escape(path) + ".rank*")
                      if _RANK_FILE.match(p) and os.path.isfile(p))
    if os.path.isfile(path):
        if ranked:
            raise InvalidArgumentError(
                f"{path} is both a trace (from one process) and the prefix of "
                f"{len(ranked)} per-rank traces ({ranked[0]}, ...); name the files you mean, "
                f"e.g. {path}.rank* for the ranks' traces")
        return [path]
    if ranked:
        return ranked
    raise InvalidArgumentError(
        f"no trace at {path}: neither a file nor a profile path with {path}.rank<r> files "
        f"({_HOW})")


def load_trace(path: str) -> RankTrace:
    """One trace file, or InvalidArgumentError saying why it is not one spmd can merge."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise InvalidArgumentError(f"cannot read {path}: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidArgumentError(f"{path} is not a trace: not JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise InvalidArgumentError(
            f"{path} is not a Chrome trace (no 'traceEvents' list); {_HOW}")
    other = data.get("otherData")
    meta = other.get("spmd") if isinstance(other, dict) else None
    if not isinstance(meta, dict):
        raise InvalidArgumentError(
            f"{path} is a Chrome trace, but not one spmd's profiler wrote: it has no clock "
            f"record (otherData.spmd), so its events cannot be put on the other ranks' clock; "
            f"profile again with this spmd")
    if meta.get("format") != TRACE_FORMAT:
        raise InvalidArgumentError(
            f"{path} is in trace format {meta.get('format')!r}; this spmd reads "
            f"{TRACE_FORMAT!r}: profile again, or merge with the spmd that wrote it")
    try:
        trace = RankTrace(path, int(meta["rank"]), int(meta["size"]), str(meta["host"]),
                          meta.get("job"), int(meta["base_perf_ns"]), _anchor(meta["clock"]),
                          _anchor(meta["clock_at_stop"]) if meta.get("clock_at_stop") else None,
                          dict(meta["tracks"]), data["traceEvents"])
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidArgumentError(
            f"{path} is damaged: its otherData.spmd record lacks or garbles {e}") from None
    if not 0 <= trace.rank < trace.size:
        raise InvalidArgumentError(
            f"{path} is damaged: it says rank {trace.rank} of a job of {trace.size}")
    return trace


def _anchor(clock) -> dict:
    return {k: int(clock[k]) for k in ("perf_ns", "wall_ns", "uncertainty_ns")}


def check_one_job(traces: list[RankTrace], force: bool = False) -> None:
    """Refuse traces that are not every rank of one run (InvalidArgumentError, naming the
    files). Different sizes, job ids or a rank twice always; with `force`, a rank missing or
    profiled spans that never overlap (traces of different runs) are let through."""
    sizes: dict[int, list[str]] = {}
    for t in traces:
        sizes.setdefault(t.size, []).append(t.path)
    if len(sizes) > 1:
        said = "; ".join(f"{', '.join(paths)} say {size} rank(s)" for size, paths in
                         sorted(sizes.items()))
        raise InvalidArgumentError(
            f"these traces are from different jobs: {said}. Name one job's traces (remove "
            f"stale files left by an earlier run with the same profile path)")
    jobs = {t.job for t in traces if t.job is not None}
    if len(jobs) > 1:
        said = "; ".join(f"{t.path}: {t.job}" for t in traces)
        raise InvalidArgumentError(
            f"these traces are from different jobs (the launcher's job ids differ: {said})")
    seen: dict[int, str] = {}
    for t in traces:
        if t.rank in seen:
            raise InvalidArgumentError(
                f"rank {t.rank} twice: {seen[t.rank]} and {t.path} (two runs' traces?); "
                f"name one trace per rank")
        seen[t.rank] = t.path
    size = traces[0].size
    missing = sorted(set(range(size)) - set(seen))
    if missing and not force:
        raise InvalidArgumentError(
            f"rank(s) {', '.join(map(str, missing))} of the job's {size} missing: only "
            f"{', '.join(seen[r] for r in sorted(seen))}. Every rank writes "
            f"<profile_path>.rank<r>; name them all (or --force to merge these alone)")
    if not force:
        _check_overlap(traces)


def _check_overlap(traces: list[RankTrace]) -> None:
    """Ranks of one run profile at the same time: refuse two whose spans are far apart."""
    latest_start = max(traces, key=lambda t: t.span_ns()[0])
    earliest_stop = min(traces, key=lambda t: t.span_ns()[1])
    gap = latest_start.span_ns()[0] - earliest_stop.span_ns()[1]
    if gap > OVERLAP_SLACK_NS:
        raise InvalidArgumentError(
            f"these traces are not from one run: {earliest_stop.path} (rank "
            f"{earliest_stop.rank}) was profiled {_when(earliest_stop)}, {latest_start.path} "
            f"(rank {latest_start.rank}) {_when(latest_start)}, {gap / 1e9:.1f} s apart. "
            f"Remove stale traces of an earlier run (or --force to merge them anyway)")


def _when(trace: RankTrace) -> str:
    start, stop = trace.span_ns()

    def clock(ns):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns / 1e9)) + \
            f".{ns // 1_000_000 % 1000:03d}"
    return f"from {clock(start)} to {clock(stop)}"
