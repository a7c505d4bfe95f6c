"""The README's main job: the digits example trained data-parallel under mpiexec; rank 0 prints
a falling loss and a test accuracy of at least 97%, and only rank 0 prints."""
from __future__ import annotations

import re

import pytest
from mpirun import run_mpi


@pytest.mark.parametrize("nprocs", [2, 4])
def test_digits_trains_data_parallel(nprocs):
    res = run_mpi(nprocs, ["examples/digits/train.py", "--epochs", "12"], timeout=300)
    assert res.returncode == 0, res.stdout[-4000:]
    losses = [float(v) for v in re.findall(r"^epoch +\d+ +loss ([0-9.]+)$", res.stdout, re.M)]
    assert len(losses) == 12, res.stdout  # one line per epoch: rank 0 only
    assert losses[-1] < losses[0] / 5, losses
    (accuracy,) = re.findall(rf"^test accuracy ([0-9.]+)  \({nprocs} ranks\)$", res.stdout, re.M)
    assert float(accuracy) >= 0.97, res.stdout[-2000:]


def test_persistent_allreduce_trains_the_same_model():
    """SPMD_HOST_COMM=mpi_persistent (gradient buckets allreduced through MPI 4 persistent
    requests) prints the same losses and accuracy as the default MPI backend: with two ranks
    a sum has one order, so the numbers are bitwise the same."""
    args = ["examples/digits/train.py", "--epochs", "4"]
    plain = run_mpi(2, args, timeout=300)
    persistent = run_mpi(2, args, timeout=300, env={"SPMD_HOST_COMM": "mpi_persistent"})
    assert plain.returncode == 0 and persistent.returncode == 0, persistent.stdout[-4000:]
    lines = [[ln for ln in r.stdout.splitlines() if ln.startswith(("epoch", "test accuracy"))]
             for r in (plain, persistent)]
    assert len(lines[0]) == 5 and lines[0] == lines[1], lines
    assert "freeing inactive persistent request" not in persistent.stdout
