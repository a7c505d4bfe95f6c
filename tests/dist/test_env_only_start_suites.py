"""tests/dist/mpi files run by trainers started without a launcher: one plain process per
trainer with fluid's PADDLE_* variables only (tests/launch/scripts/plain_trainers.py), which join
one world at trainer 0's endpoint (spmd/comm/join.py). Every collective, data-parallel,
checkpoint and fleet test then passes as under mpiexec.

pytest runs with -s: a trainer re-executes itself under its own mpiexec at `import spmd`, and
pytest's output capture, begun by then, would keep what the re-executed process prints.
"""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAIN_TRAINERS = ROOT / "tests" / "launch" / "scripts" / "plain_trainers.py"
# One pytest session per trainer count, all its files in it (a session's start on every
# trainer costs seconds; see test_under_mpiexec.py).
SUITES = {2: ("test_collective_suite.py", "test_data_parallel.py", "test_fleet_collective.py",
              "test_checkpoint.py", "test_fluid_behaviours_nccl2.py",
              "test_program_mismatch.py"),
          3: ("test_fleet_collective.py", "test_checkpoint.py")}
BOUND_S = 900


@pytest.mark.parametrize("trainers", sorted(SUITES))
def test_files_as_env_only_trainers(trainers):
    test_files = SUITES[trainers]
    env = dict(os.environ, SPMD_COLLECTIVE_TIMEOUT="60", SPMD_JOIN_TIMEOUT="120",
               PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, str(PLAIN_TRAINERS), str(trainers), "-m", "pytest", "-q", "-rfE",
           "-s", "--with-mpi", "-p", "no:cacheprovider",
           *(f"tests/dist/mpi/{name}" for name in test_files)]
    # a session of its own: a hang is ended with every trainer, not the starter alone
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"still running after {BOUND_S} s:\n{out[-6000:]}") from None
    assert proc.returncode == 0, f"{trainers} env-only trainers, {test_files}:\n{out[-8000:]}"
    assert out.count(" passed") == trainers and " failed" not in out, out[-4000:]
