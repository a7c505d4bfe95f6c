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
