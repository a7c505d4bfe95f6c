"""Runs every tests/dist/mpi file under mpiexec at 1 and 2 ranks, and at 4 ranks a
representative share: every file but the two largest, test_collective_suite.py and
test_data_parallel.py (4 oversubscribed ranks on a CI machine's 2 cores: about 90 of the
4-rank session's 200 s, measured quiet, go to them; they run whole at 1 and 2 ranks). The
whole matrix, those two at 4 ranks too:
`SPMD_MPI_MATRIX=all python -m pytest tests/dist/test_under_mpiexec.py`.

All the files go to one pytest session per rank count: a session's start (mpiexec, Python,
spmd and pytest on every rank) costs seconds on an oversubscribed machine, and 27 files times 3
rank counts of it was most of tests/dist's time. A failure names its test (pytest's summary
lines, below); a hang is ended by SPMD_COLLECTIVE_TIMEOUT, naming the rank and the op, and the
session goes on to the next test. One file alone:
`mpiexec -n 4 python -m pytest -q --with-mpi tests/dist/mpi/test_x.py`.
"""
from __future__ import annotations

import os
import pathlib
import re

import pytest
from mpirun import run_mpi

MPI_DIR = pathlib.Path(__file__).parent / "mpi"
MPI_TESTS = sorted(p.name for p in MPI_DIR.glob("test_*.py"))
BOUND_S = 60 * len(MPI_TESTS)  # a whole session; each hang inside it ends after 60 s
# left out of CI's 4-rank session (module doc); SPMD_MPI_MATRIX=all runs them there too
LARGEST = ("test_collective_suite.py", "test_data_parallel.py")


def files_at(nprocs: int) -> list[str]:
    if nprocs < 4 or os.environ.get("SPMD_MPI_MATRIX") == "all":
        return MPI_TESTS
    return [name for name in MPI_TESTS if name not in LARGEST]


def failures(output: str) -> str:
    """pytest's FAILED / ERROR summary lines, once each (every rank prints its own)."""
    lines = re.findall(r"^(?:FAILED|ERROR) .*$", output, re.M)
    return "\n".join(dict.fromkeys(lines))


@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_mpi_files_under_mpiexec(nprocs):
    res = run_mpi(nprocs, ["-m", "pytest", "-q", "-rfE", "--with-mpi", "-p", "no:cacheprovider",
                           *(f"tests/dist/mpi/{name}" for name in files_at(nprocs))],
                  timeout=BOUND_S)
    assert res.returncode == 0, (f"mpiexec -n {nprocs} pytest tests/dist/mpi failed:\n"
                                 f"{failures(res.stdout)}\n\n{res.stdout[-8000:]}")
    assert " passed" in res.stdout and " failed" not in res.stdout, res.stdout[-4000:]
