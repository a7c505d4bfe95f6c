"""Runs every tests/dist/mpi file under mpiexec at 1, 2 and 4 ranks."""
from __future__ import annotations

import pathlib

import pytest
from mpirun import run_mpi

MPI_TESTS = sorted(p.name for p in (pathlib.Path(__file__).parent / "mpi").glob("test_*.py"))


@pytest.mark.parametrize("nprocs", [1, 2, 4])
@pytest.mark.parametrize("test_file", MPI_TESTS)
def test_file_under_mpiexec(test_file, nprocs):
    res = run_mpi(nprocs, ["-m", "pytest", "-q", "-x", "--with-mpi", "-p", "no:cacheprovider",
                           f"tests/dist/mpi/{test_file}"])
    assert res.returncode == 0, \
        f"mpiexec -n {nprocs} pytest {test_file} failed:\n{res.stdout[-8000:]}"
    assert " passed" in res.stdout and " failed" not in res.stdout, res.stdout[-4000:]
