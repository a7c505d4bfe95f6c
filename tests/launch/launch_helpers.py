"""Helpers for tests/launch: run paddle-launch, mpiexec and friends as subprocesses with a
deadline, and find the processes a test left behind.

Every command a test starts carries a unique LAUNCH_TEST_TOKEN in its environment, which MPI
passes on to the process manager's helpers and to every worker; after the test, no process
may still have it (`/proc/*/environ`).
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = pathlib.Path(__file__).resolve().parent / "scripts"
PYTHON = sys.executable
MPIEXEC = str(pathlib.Path(PYTHON).parent / "mpiexec")


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def base_env(token: str, **extra: str) -> dict:
    env = dict(os.environ, LAUNCH_TEST_TOKEN=token, OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("SLURM_JOB_ID", None)  # tests of the local scheduler, even when run inside SLURM
    env.update(extra)
    return env


def run(cmd: list[str], token: str, timeout: float = 60, cwd=ROOT, **extra_env) -> Result:
    """Run `cmd` to completion within `timeout` seconds (a hang fails the test)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=base_env(token, **extra_env), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{' '.join(cmd)} still running after {timeout} s:\n"
                             f"{out[-3000:]}\n{err[-3000:]}") from None
    return Result(proc.returncode, out, err, time.monotonic() - start)


def launcher(*args: str) -> list[str]:
    return [PYTHON, "-m", "launch", *args]


def processes_with(token: str) -> list[str]:
    """`pid cmdline` of every live process whose environment holds `token`."""
    found = []
    needle = f"LAUNCH_TEST_TOKEN={token}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read():
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # exited; only its parent's bookkeeping is left
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry} {cmdline}")
        except OSError:
            continue
    return found
