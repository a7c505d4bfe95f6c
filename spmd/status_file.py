"""The status file a worker started by paddle-launch writes and the launcher reads.

One event a line, `<unix time> <event> <detail>`; the worker's supervisor (spmd.guard), its
collectives (spmd.comm) and spmd.run append, the launcher parses. This module imports nothing
of spmd, so the launcher reads status files without loading the engine.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "status")
>>> append_event(path, "wait", "allreduce")
>>> read_status(path).waiting[0][0]
'allreduce'
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field


def append_event(path: str, event: str, detail: str = "", when: float | None = None) -> None:
    """Append `<unix time> <event> <detail>` to a status file (time: `when`, default now).

    One write on an O_APPEND descriptor, so lines from the supervisor, the worker and its
    threads never interleave. Events: `start pid=P supervisor=S host=H`, `wait <op>` and
    `done <op>` (a collective waited in; spmd.comm.mpi), `error <Type: message>`,
    `ended code=N` or `ended signal=N` (written by the supervisor).
    """
    when = time.time() if when is None else when
    line = f"{when:.6f} {event} {detail}".rstrip().replace("\n", " ") + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8", "replace"))
    finally:
        os.close(fd)


@dataclass
class WorkerStatus:
    """What a status file says about one worker; fields are None until their event is seen."""

    pid: int | None = None
    supervisor_pid: int | None = None
    host: str | None = None
    started: float | None = None
    waiting: list = field(default_factory=list)
    """(op, since) of each collective entered and not left, oldest first."""
    error: str | None = None
    error_time: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    ended: float | None = None

    @property
    def failed(self) -> bool:
        """Ended with a non-zero exit code or by a signal."""
        return self.signal is not None or (self.exit_code is not None and self.exit_code != 0)

    @property
    def failed_at(self) -> float | None:
        """When it failed: its error if it recorded one, else the supervisor's record."""
        if not self.failed:
            return None
        return self.error_time if self.error_time is not None else self.ended


def read_status(path: str) -> WorkerStatus:
    """Parse a status file (missing file: an empty status)."""
    status = WorkerStatus()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return status
    for line in lines:
        parts = line.split(" ", 2)
        if len(parts) < 2:
            continue  # a line being written
        try:
            when = float(parts[0])
        except ValueError:
            continue
        event, detail = parts[1], parts[2] if len(parts) > 2 else ""
        _apply(status, when, event, detail)
    return status


def _apply(status: WorkerStatus, when: float, event: str, detail: str) -> None:
    if event == "start":
        values = dict(kv.split("=", 1) for kv in detail.split() if "=" in kv)
        status.pid = int(values.get("pid", 0)) or None
        status.supervisor_pid = int(values.get("supervisor", 0)) or None
        status.host, status.started = values.get("host"), when
    elif event == "wait":
        status.waiting.append((detail, when))
    elif event == "done":
        for i, (op, _) in enumerate(status.waiting):
            if op == detail:
                del status.waiting[i]
                break
    elif event == "error" and status.error is None:
        status.error, status.error_time = detail, when
    elif event == "ended":
        key, _, value = detail.partition("=")
        if key == "signal":
            status.signal = int(value)
        else:
            status.exit_code = int(value)
        status.ended = when
