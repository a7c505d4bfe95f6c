"""A rank that leaves before the job's first collective, however it leaves (sys.exit(0),
os._exit(0), the end of a script that broke out early), leaves the other ranks waiting for it
in MPI's start-up, where no timeout of spmd's runs: MPI_Init (and the first collective) needs
every rank. The launcher sees it in the status files: that rank ended without an error and
without ever entering a collective, while another one still runs with MPI loaded (or waits in
a collective). A non-zero end is a failure already; this catches the clean-looking ones.

A rank that did join the job and ends first is not this: its supervisor holds its end until
every rank left (spmd/guard/supervisor.py), so its `ended` comes last.
"""
from __future__ import annotations

import time

GRACE_S = 3.0  # after the early end: the others may still end by themselves (no MPI at all)


def entered_a_collective(status_path: str) -> bool:
    """Whether the worker of this status file ever entered a collective (a `wait` event)."""
    try:
        with open(status_path, encoding="utf-8", errors="replace") as f:
            return any(line.split(" ", 2)[1:2] == ["wait"] for line in f)
    except OSError:
        return False


def mpi_loaded(pid: int | None) -> bool:
    """Whether process `pid` (of this machine) has an MPI library mapped."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any("/libmpi" in line for line in f)
    except OSError:
        return False


def left_early(statuses: dict, status_path) -> list[int]:
    """Ranks of `statuses` that ended cleanly without ever entering a collective."""
    return [rank for rank, status in sorted(statuses.items())
            if status.ended is not None and not status.failed
            and not entered_a_collective(status_path(rank))]


def early_exit_reason(rank: int, status, waiting: list[int]) -> str:
    """What to tell: rank `rank` left before the job's first collective; `waiting` the ranks
    that waited for it."""
    how = f"exit code {status.exit_code}" if status.exit_code is not None else "ended"
    names = ", ".join(map(str, waiting)) or "the others"
    plural = len(waiting) != 1
    return (f"rank {rank} left the job before its first collective ({how}: sys.exit(0), "
            f"os._exit(0) or the end of its script) while rank{'s' if plural else ''} {names} "
            f"wait{'' if plural else 's'} for it in MPI start-up, which needs every rank: every "
            f"rank must run the job's collectives (look for an early exit or return on rank "
            f"{rank}, e.g. a missing file or a rank-dependent branch)")


def left_before_first_collective(statuses: dict, status_path, host: str,
                                 now: float | None = None) -> str:
    """'' or the reason to end the job: a rank of `statuses` (rank -> WorkerStatus) ended
    cleanly, at least GRACE_S ago, before ever entering a collective, while another rank
    waits for it (in a collective, or with MPI loaded: in MPI start-up). `status_path(rank)`
    is a rank's status file; `host` this machine (other machines' pids are not ours)."""
    now = time.time() if now is None else now
    for rank in left_early(statuses, status_path):
        if now - statuses[rank].ended < GRACE_S:
            continue
        waiting = [r for r, other in sorted(statuses.items())
                   if r != rank and other.ended is None
                   and (other.waiting or (other.host == host and mpi_loaded(other.pid)))]
        if waiting:
            return early_exit_reason(rank, statuses[rank], waiting)
    return ""
