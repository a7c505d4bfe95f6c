"""The failure report: which rank failed first (the root cause), how (exit code or signal),
the end of its log, and for every other rank where it was when the job was stopped: the
collective it waited in, or its Python stack.
"""
from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass, field

TAIL_LINES = 20


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def tail(path: str, lines: int = TAIL_LINES) -> list[str]:
    """The last `lines` lines of a file ([] when it is missing)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read()
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-lines:]


def clean_stack(text: str) -> list[str]:
    """A faulthandler dump, the thread that was interrupted (the main one, as a rule) first,
    without the frames of runpy and spmd.run, which every worker has."""
    threads: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip() or "<frozen runpy>" in line or "/spmd/run.py" in line:
            continue
        if line.startswith(("Thread ", "Current thread ")) or not threads:
            threads.append([])
        threads[-1].append(line.rstrip())
    threads.sort(key=lambda lines: not lines[0].startswith("Current thread"))
    return [line for lines in threads for line in lines]


# spmd's collectives (spmd/comm/*.py), as their frames appear in a stack dump
_COLLECTIVE_FRAME = re.compile(
    r"spmd/comm/\w+\.py\", line \d+ in (i?allreduce|reduce|broadcast|allgather|reduce_scatter|"
    r"barrier|bcast_bytes)\b")


def collective_in_stack(stack: list[str]) -> str | None:
    """The collective a stack dump shows a thread inside (the outermost such frame), if any:
    a rank that entered one just before it was asked has not yet recorded the wait."""
    for line in reversed(stack):
        found = _COLLECTIVE_FRAME.search(line)
        if found:
            return found.group(1)
    return None


@dataclass
class Outcome:
    """How a launch ended, as the launcher saw it."""

    statuses: dict
    """rank -> spmd.status_file.WorkerStatus, for the ranks whose status file this machine
    can read."""
    world_size: int
    root: int | None = None
    """The rank that failed first; None when no worker failed (interrupted, or the process
    manager itself failed)."""
    stopped: set = field(default_factory=set)
    """Ranks still running when the launcher stopped the job."""
    stacks: dict = field(default_factory=dict)
    """rank -> the Python stack it dumped when asked, for ranks stopped by the launcher."""
    reason: str = ""
    """Why the launcher stopped the job, when no worker failure says it."""
    mpi_log: str | None = None


def _how(status) -> str:
    if status is None:
        return "no status recorded (it never started, or its log_dir is on another machine)"
    if status.signal is not None:
        how = f"killed by {signal_name(status.signal)}"
    elif status.exit_code is not None:
        how = f"exit code {status.exit_code}"
    else:  # the launcher had stopped everything before it wrote the report
        how = "ended without a record (stopped by the process manager)"
    return how + (f": {status.error}" if status.error else "")


def _where(rank: int, status, outcome: Outcome, now: float) -> list[str]:
    """Where a rank was: the collectives it waited in, or its stack."""
    if status is not None and status.waiting:
        end = status.ended or now
        ops = ", ".join(f"{op} (for {end - since:.1f} s)" for op, since in status.waiting)
        return [f"    {'was ' if status.ended else ''}waiting in {ops}"]
    stack = clean_stack(outcome.stacks.get(rank, ""))
    op = collective_in_stack(stack)
    if op is not None:
        return [f"    waiting in {op} (just entered: seen in its stack)"]
    if stack:
        return ["    not in a collective; its Python stack (most recent call first):"] + [
            f"      | {line.strip()}" for line in stack]
    if rank in outcome.stopped:
        return ["    not in a collective (no stack: it did not answer in time)"]
    return []


def _header(outcome: Outcome, log_dir: str) -> str:
    if outcome.root is not None:
        status = outcome.statuses[outcome.root]
        host = status.host or "?"
        how = _how(status).split(": ", 1)[0]
        error = f" ({status.error.split(':', 1)[0]})" if status.error else ""
        return (f"paddle-launch: the job failed: rank {outcome.root} on {host}, {how}{error}; "
                f"the root cause and every rank's state:")
    return f"paddle-launch: the job failed: {outcome.reason}"


def format_report(outcome: Outcome, log_dir: str, log_path) -> str:
    """The report printed when a job fails or is interrupted. `log_path(rank)` is a rank's
    log file."""
    now = time.time()
    lines = [_header(outcome, log_dir),
             f"  every worker was stopped; each rank's output is in {log_dir}/workerlog.N"]
    order = sorted(range(outcome.world_size), key=lambda r: (r != outcome.root, r))
    for rank in order:
        status = outcome.statuses.get(rank)
        host = (status.host if status else None) or "?"
        if rank == outcome.root:
            label = "[root cause] " + _how(status)
        elif rank in outcome.stopped:
            label = "stopped by the launcher"
        elif status is not None and status.failed:
            label = _how(status) + (" (after the root cause)" if outcome.root is not None
                                    else "")
        else:
            label = _how(status)
        lines.append(f"  rank {rank} on {host}: {label}")
        lines += _where(rank, status, outcome, now)
        if rank == outcome.root:
            last = tail(log_path(rank))
            lines.append(f"    log {log_path(rank)}, last {len(last)} line(s):")
            lines += [f"      | {line}" for line in last]
        elif status is not None and status.failed and rank not in outcome.stopped:
            lines.append(f"    log {log_path(rank)}")
    if outcome.root is None:
        lines += _log_tails(outcome, log_path)
    lines += _timeout_hint(outcome)
    # Its output matters when no worker could say what happened; after the launcher stopped
    # the job it only repeats that the ranks were terminated.
    if outcome.mpi_log and (not outcome.statuses or "process manager" in outcome.reason):
        last = tail(outcome.mpi_log)
        if last:
            lines.append(f"  the process manager's output ({outcome.mpi_log}), last lines:")
            lines += [f"      | {line}" for line in last]
    return "\n".join(lines)


def _log_tails(outcome: Outcome, log_path, ranks_shown: int = 8) -> list[str]:
    """No worker recorded a failure (the process manager ended the job, e.g. after a rank
    called MPI_Abort): the end of the logs, the ranks that called MPI_Abort first."""
    tails = {rank: tail(log_path(rank), 5) for rank in range(outcome.world_size)}
    aborted = [r for r, lines in tails.items() if any("MPI_Abort" in line for line in lines)]
    shown = (aborted + [r for r in tails if r not in aborted and tails[r]])[:ranks_shown]
    lines = []
    for rank in shown:
        note = " (it called MPI_Abort: the likely root cause)" if rank in aborted else ""
        lines.append(f"  rank {rank}'s log {log_path(rank)}, last lines{note}:")
        lines += [f"      | {line}" for line in tails[rank]]
    return lines


def _timeout_hint(outcome: Outcome) -> list[str]:
    """After a collective timeout the likely culprits are the ranks that were not waiting."""
    timed_out = [r for r, s in outcome.statuses.items()
                 if s.error and "did not complete within" in s.error]
    if not timed_out:
        return []
    elsewhere = [r for r in range(outcome.world_size)
                 if r in outcome.statuses and not outcome.statuses[r].waiting
                 and r not in timed_out]
    if not elsewhere:
        return []
    return [f"  a collective timed out on rank(s) {', '.join(map(str, timed_out))} while rank(s) "
            f"{', '.join(map(str, elsewhere))} never entered it: look at their stacks above"]
