"""Launch a Python command line on N ranks with the mpiexec that goes with mpi4py, bounded by a
timeout."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def mpiexec() -> str:
    """The mpiexec that goes with this Python's mpi4py (the MPICH wheel's, in the venv)."""
    local = pathlib.Path(sys.executable).parent / "mpiexec"
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if not found:
        raise RuntimeError("no mpiexec found: pip install mpich (it is a dependency of spmd)")
    return found


def run_mpi(n: int, args: list[str], timeout: float = 240, env: dict | None = None):
    """Run `python args...` on n ranks; returns CompletedProcess (stdout+stderr merged)."""
    full_env = dict(os.environ, SPMD_COLLECTIVE_TIMEOUT="60", PYTHONUNBUFFERED="1",
                    OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    full_env.update(env or {})
    cmd = [mpiexec(), "-n", str(n), sys.executable, *args]
    try:
        return subprocess.run(cmd, cwd=ROOT, env=full_env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        raise AssertionError(
            f"{' '.join(cmd)} still running after {timeout} s (a hang); output so far:\n"
            f"{out[-6000:]}") from None
