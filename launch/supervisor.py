"""The process supervisor every paddle-launch job shares (the collective job of launch/job.py
and its multi-node form, the parameter-server job of launch/ps.py): it starts the job's
processes so that none outlives the launcher, copies one worker's log to the console, turns
SIGINT/SIGTERM/SIGHUP into a clean stop of the whole job, stops processes with SIGTERM and then
SIGKILL, and writes the failure report.

A job subclasses Supervisor: `start()` starts its processes, `poll()` looks at them once
(None while the job runs, else the launcher's exit status), `fail_for_signal()` ends the job
after a signal, `close()` releases what is left.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from abc import ABC, abstractmethod

POLL_S = 0.05
TERM_WAIT_S = 3.0  # SIGTERM, then SIGKILL after this
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def die_with_launcher() -> None:
    """In a child (before exec): SIGTERM when the launcher dies, so even a SIGKILLed launcher
    leaves no job behind (Linux, PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def alive(pid: int | None) -> bool:
    """Whether a process runs (a zombie does not: nobody may reap it in a container)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


def kill(pid: int | None, sig: int) -> None:
    if pid:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def killpg(pid: int | None, sig: int) -> None:
    """Signal the process group `pid` leads (a child started with start_new_session)."""
    if pid:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def escalate(send, running, wait_s: float = TERM_WAIT_S) -> None:
    """`send(SIGTERM)`, wait up to `wait_s` for `running()` to turn false, then the same with
    SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        send(sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not running():
                return
            time.sleep(POLL_S)


class Follower:
    """Copies what a file gains to a stream: one worker's log to the console."""

    def __init__(self, path: str, stream):
        self.path, self.stream, self.offset = path, stream, 0

    def pump(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        if data:
            self.offset += len(data)
            self.stream.write(data)
            self.stream.flush()


class Supervisor(ABC):
    """One job's processes, from start to a clean end."""

    def __init__(self, log_dir: str, console_log: str):
        self.log_dir = log_dir
        self.signal: int | None = None
        self.console = Follower(console_log, sys.stdout.buffer)

    def run(self) -> int:
        """Start the job and watch it; the launcher's exit status."""
        previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        try:
            self.start()
            return self.watch()
        finally:
            self.close()
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _on_signal(self, signum, frame) -> None:
        self.signal = signum

    def watch(self) -> int:
        while True:
            self.console.pump()
            result = self.poll()
            if result is not None:
                return result
            if self.signal is not None:
                return self.fail_for_signal(f"paddle-launch got "
                                            f"{signal.Signals(self.signal).name}",
                                            128 + self.signal)
            time.sleep(POLL_S)

    @abstractmethod
    def start(self) -> None:
        """Start the job's processes."""

    @abstractmethod
    def poll(self) -> int | None:
        """Look at the job once: None while it runs, else the launcher's exit status."""

    @abstractmethod
    def fail_for_signal(self, reason: str, code: int) -> int:
        """The launcher got a stop signal: stop the job, report, return `code`."""

    @abstractmethod
    def close(self) -> None:
        """Release what the job still holds (after poll() ended it, or an error)."""

    def write_report(self, text: str) -> None:
        """The failure report: on stderr after the console's last words, and in
        log_dir/failure_report.txt."""
        sys.stdout.flush()
        print(text, file=sys.stderr, flush=True)
        with open(os.path.join(self.log_dir, "failure_report.txt"), "w") as f:
            f.write(text + "\n")

    def remove_report(self) -> None:
        """A previous run's report, which would be read as this run's."""
        path = os.path.join(self.log_dir, "failure_report.txt")
        if os.path.exists(path):
            os.remove(path)
