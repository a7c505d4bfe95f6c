"""Runs every tests/dist/mpi file under mpiexec at 1, 2 and 4 ranks.

All the files go to one pytest session per rank count: a session's start (mpiexec, Python,
spmd and pytest on every rank) costs seconds on an oversubscribed machine, and 27 files times 3
rank counts of it was most of tests/dist's time. A failure names its test (pytest's summary
lines, below); a hang is ended by SPMD_COLLECTIVE_TIMEOUT, naming the rank and the op, and the
session goes on to the next test. One file alone:
`mpiexec -n 4 python -m pytest -q --with-mpi tests/dist/mpi/test_x.py`.
"""
from __future__ import annotations

import pathlib
import re

import pytest
from mpirun import run_mpi

MPI_DIR = pathlib.Path(__file__).parent / "mpi"
MPI_TESTS = sorted(p.name for p in MPI_DIR.glob("test_*.py"))
BOUND_S = 60 * len(MPI_TESTS)  # a whole session; each hang inside it ends after 60 s


def failures(output: str) -> str:
    """pytest's FAILED / ERROR summary lines, once each (every rank prints its own)."""
    lines = re.findall(r"^(?:FAILED|ERROR) .*$", output, re.M)
    return "\n".join(dict.fromkeys(lines))


@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_mpi_files_under_mpiexec(nprocs):
    res = run_mpi(nprocs, ["-m", "pytest", "-q", "-rfE", "--with-mpi", "-p", "no:cacheprovider",
                           *(f"tests/dist/mpi/{name}" for name in MPI_TESTS)],
                  timeout=BOUND_S)
    assert res.returncode == 0, (f"mpiexec -n {nprocs} pytest tests/dist/mpi failed:\n"
                                 f"{failures(res.stdout)}\n\n{res.stdout[-8000:]}")
    assert " passed" in res.stdout and " failed" not in res.stdout, res.stdout[-4000:]
