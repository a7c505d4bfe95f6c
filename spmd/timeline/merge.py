"""The merged trace: every rank's events on the common clock, one process per rank, one
named track per kind of event (ops, comm issue, comm wait, comm run) and thread.

>>> track_name({"kind": "comm run", "index": 0, "comm": "MPICommunicator"}, 1)
'comm run (MPICommunicator)'
"""
from __future__ import annotations

from ..profiler import COMM_TIDS
from .clock import Alignment, align
from .files import RankTrace

# track order within a rank, top to bottom
KINDS = ("ops", "comm issue", "comm wait", "comm run")
_ABOUT = {
    "ops": "every op and run the executor timed (a collective op's time is its issue)",
    "comm issue": "the executor's thread handing a collective to the progress engine "
                  "(with overlap=False: running it there and then)",
    "comm wait": "the executor's thread blocked until issued collectives complete",
    "comm run": "the collective running on its communicator's progress engine",
}


def track_name(track: dict, tracks_of_kind: int) -> str:
    """A track's name: its kind, and which thread (or communicator and place) where a rank has
    several."""
    kind, index = track.get("kind", "ops"), track.get("index", 0)
    if kind == "comm run":
        comm = track.get("comm") or "communicator"
        return f"comm run ({comm})" if tracks_of_kind == 1 else \
            f"comm run {index} ({comm}, place {track.get('member', 0)})"
    return kind if tracks_of_kind == 1 else f"{kind} (thread {index})"


def _tracks(trace: RankTrace) -> dict[int, dict]:
    """tid -> track description, for every tid the trace's events use."""
    tracks = {int(tid): dict(track) for tid, track in trace.tracks.items()}
    for e in trace.events:
        tid = e.get("tid", 0)
        if tid not in tracks:  # a tid the record does not describe: by its number
            kind = next((k for k, base in sorted(COMM_TIDS.items(), key=lambda i: -i[1])
                         if tid >= base), None)
            tracks[tid] = {"kind": f"comm {kind}" if kind else "ops",
                           "index": tid - COMM_TIDS[kind] if kind else tid}
    return tracks


def _metadata(trace: RankTrace) -> list[dict]:
    rank = trace.rank
    meta = [{"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
             "args": {"name": f"rank {rank}"}},
            {"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0,
             "args": {"sort_index": rank}},
            {"name": "process_labels", "ph": "M", "pid": rank, "tid": 0,
             "args": {"labels": trace.host}}]
    tracks = _tracks(trace)
    per_kind = {k: sum(1 for t in tracks.values() if t.get("kind") == k) for k in KINDS}
    order = sorted(tracks, key=lambda tid: (KINDS.index(tracks[tid].get("kind", "ops"))
                                            if tracks[tid].get("kind") in KINDS else len(KINDS),
                                            tracks[tid].get("member", 0),
                                            tracks[tid].get("index", 0)))
    for position, tid in enumerate(order):
        track = tracks[tid]
        meta.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid,
                     "args": {"name": track_name(track, per_kind.get(track.get("kind"), 1))}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": rank, "tid": tid,
                     "args": {"sort_index": position}})
    return meta


def merge_traces(traces: list[RankTrace], alignment: Alignment | None = None) -> dict:
    """One Chrome trace of `traces` (one job's: files.check_one_job): every event's ts in
    microseconds from the earliest event of any rank, on the clock `alignment` (default
    clock.align) gives; pid = rank."""
    traces = sorted(traces, key=lambda t: t.rank)
    alignment = alignment or align(traces)
    firsts = [alignment.origins_ns[t.rank] + round(min(e.get("ts", 0) for e in t.events) * 1e3)
              for t in traces if t.events]
    zero = min(firsts, default=min(alignment.origins_ns.values()))
    events: list[dict] = []
    for t in traces:
        events += _metadata(t)
        shift_us = (alignment.origins_ns[t.rank] - zero) / 1e3
        for e in t.events:
            if e.get("ph") == "M":
                continue  # the merged trace names processes and threads itself
            moved = dict(e, pid=t.rank)
            if "ts" in moved:
                moved["ts"] = round(moved["ts"] + shift_us, 3)
            events.append(moved)
    about = {
        "ranks": traces[0].size if traces else 0,
        "merged": [t.rank for t in traces],
        "files": {t.rank: t.path for t in traces},
        "job": next((t.job for t in traces if t.job), None),
        "hosts": {t.rank: t.host for t in traces},
        "clock": "each rank's perf_counter stamps on the wall clock by the pair read at "
                 "start_profiler; hosts' offsets checked against the collectives",
        "zero_wall_ns": zero,
        "clock_uncertainty_us": alignment.uncertainty_ns / 1e3,
        "host_corrections_us": {h: ns / 1e3 for h, ns in alignment.corrections_ns.items()},
        "tracks": _ABOUT,
        "notes": list(alignment.notes),
    }
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"spmd_timeline": about}}
