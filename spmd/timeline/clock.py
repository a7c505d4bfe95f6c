"""One clock for every rank's events (the reasoning is in the package doc).

Each rank stamps its events with time.perf_counter_ns, and records one (perf_counter_ns,
time.time_ns) pair read together at start_profiler. An event's common time is its wall-clock
time by that pair. On one host every process reads the same wall clock, so this is exact to
the pair's read (the recorded uncertainty, well under a microsecond unless the reads were
preempted). Ranks on different hosts are as aligned as the hosts' clocks are (NTP: usually
within a millisecond); there the collectives check it: no rank can leave an allreduce,
allgather, reduce-scatter or barrier before every rank entered it, so each one bounds the
offset between two hosts' clocks, and a host whose wall clock lies outside those bounds is
moved by the least amount that satisfies them all.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .files import RankTrace

# collectives no rank completes before every rank has started them
SYNCHRONIZING = ("allreduce", "allgather", "reduce_scatter", "barrier")
# a wall clock that moved this much against perf_counter while profiling was stepped
STEP_NOTE_NS = 1_000_000


@dataclass
class Alignment:
    """Where each rank's trace starts on the common clock (wall-clock ns of its ts 0), the
    correction applied to each host's wall clock, and notes a person should read."""

    origins_ns: dict[int, int]
    corrections_ns: dict[str, int]
    notes: list[str] = field(default_factory=list)
    uncertainty_ns: int = 0


def align(traces: list[RankTrace]) -> Alignment:
    """The common clock for `traces` (one job's, checked by files.check_one_job)."""
    origins = {t.rank: t.wall_ns(t.base_perf_ns) for t in traces}
    notes = [note for t in traces if (note := _stepped(t))]
    hosts = list(dict.fromkeys(t.host for t in sorted(traces, key=lambda t: t.rank)))
    corrections = {h: 0 for h in hosts}
    for host in hosts[1:]:
        corrections[host] = _host_offset(traces, origins, hosts[0], host, notes)
    for t in traces:
        origins[t.rank] += corrections[t.host]
    return Alignment(origins, corrections, notes,
                     max(t.clock["uncertainty_ns"] for t in traces))


def _stepped(trace: RankTrace) -> str:
    stop = trace.clock_at_stop
    if stop is None:
        return ""
    moved = (stop["wall_ns"] - stop["perf_ns"]) - (trace.clock["wall_ns"] - trace.clock["perf_ns"])
    if abs(moved) <= STEP_NOTE_NS:
        return ""
    return (f"rank {trace.rank}'s wall clock moved {moved / 1e6:+.3f} ms against its monotonic "
            f"clock while it profiled (a clock step: NTP or a manual change); its events are "
            f"placed by the clock at start_profiler")


def collectives(trace: RankTrace, origin_ns: int) -> dict[tuple, list[tuple[int, int]]]:
    """The trace's synchronizing collectives over every rank, as (start, end) ns on the clock
    `origin_ns` puts it on, by (communicator, member, op) in the order they ran."""
    found: dict[tuple, list[tuple[int, int]]] = {}
    for e in trace.events:
        args = e.get("args") or {}
        if e.get("cat") != "comm run" or e.get("name") not in SYNCHRONIZING or \
                args.get("processes") != trace.size:
            continue
        start = origin_ns + round(e["ts"] * 1e3)
        found.setdefault((args.get("comm"), args.get("member"), e["name"]), []).append(
            (start, start + round(e["dur"] * 1e3)))
    for runs in found.values():
        runs.sort()
    return found


def offset_bounds(mine: dict, theirs: dict) -> tuple[float, float, int]:
    """(lo, hi, collectives matched): the shifts d of `mine`'s clock for which no matched
    collective ends on one side before it started on the other. Collectives match by key and
    order, where both sides ran as many of a key."""
    lo, hi, matched = -math.inf, math.inf, 0
    for key, runs in mine.items():
        other = theirs.get(key)
        if other is None or len(other) != len(runs):
            continue
        for (start, end), (other_start, other_end) in zip(runs, other):
            hi = min(hi, other_end - start)
            lo = max(lo, other_start - end)
            matched += 1
    return lo, hi, matched


def _host_offset(traces, origins, reference: str, host: str, notes: list[str]) -> int:
    """The ns to add to `host`'s wall clock to agree with `reference`'s, by the collectives."""
    ref = [collectives(t, origins[t.rank]) for t in traces if t.host == reference]
    lo, hi, matched = -math.inf, math.inf, 0
    for t in traces:
        if t.host != host:
            continue
        mine = collectives(t, origins[t.rank])
        for theirs in ref:
            low, high, n = offset_bounds(mine, theirs)
            lo, hi, matched = max(lo, low), min(hi, high), matched + n
    if not matched:
        notes.append(f"the ranks on {host} and on {reference} share no collective over every "
                     f"rank, so their events are aligned by the hosts' wall clocks alone")
        return 0
    if lo > hi:
        notes.append(f"the {matched} collectives of the ranks on {host} fit no single offset "
                     f"from {reference}'s clock (they disagree by {(lo - hi) / 1e3:.1f} us: "
                     f"clocks drifting apart); left on the hosts' wall clocks")
        return 0
    shift = int(min(max(0, lo), hi))
    if shift:
        notes.append(f"{host}'s wall clock is off {reference}'s by at least "
                     f"{abs(shift) / 1e3:.1f} us by {matched} collectives (no rank leaves one "
                     f"before every rank entered it); its ranks' events moved "
                     f"{shift / 1e3:+.1f} us")
    return shift
