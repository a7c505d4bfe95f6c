"""examples/detection/ssd_tiny.py (the zoo's SSD, shrunk: LoD ground truth, ssd_loss, sync
batch_norm) trained data-parallel under mpiexec: both ranks end with the same parameters, the
loss falls, and with the per-image mean loss (--mean_loss) 2 ranks on half of each batch make
the update one process makes on the whole batch."""
from __future__ import annotations

import re

import numpy as np
from mpirun import run_mpi

SCRIPT = "examples/detection/ssd_tiny.py"


def _params(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def test_two_ranks_train_to_equal_parameters(tmp_path):
    res = run_mpi(2, [SCRIPT, "--steps", "10", "--save_params", str(tmp_path / "p")],
                  timeout=400)
    assert res.returncode == 0, res.stdout[-4000:]
    losses = [float(v) for v in re.findall(r"^step +\d+ +loss ([0-9.]+)$", res.stdout, re.M)]
    assert len(losses) == 10, res.stdout[-3000:]  # rank 0 prints, once per step
    assert np.mean(losses[-3:]) < np.mean(losses[:3]), losses
    assert re.search(r"detections \d+  \(2 ranks\)$", res.stdout, re.M), res.stdout[-2000:]
    rank0, rank1 = _params(tmp_path / "p.rank0.npz"), _params(tmp_path / "p.rank1.npz")
    assert sorted(rank0) == sorted(rank1) and len(rank0) > 30
    for name in rank0:
        np.testing.assert_array_equal(rank0[name], rank1[name], err_msg=name)


def test_two_ranks_make_one_process_update(tmp_path):
    args = [SCRIPT, "--steps", "1", "--mean_loss", "--optimizer", "momentum"]
    one = run_mpi(1, args + ["--save_params", str(tmp_path / "one.npz")], timeout=300)
    two = run_mpi(2, args + ["--save_params", str(tmp_path / "two")], timeout=300)
    assert one.returncode == 0 and two.returncode == 0, one.stdout[-2000:] + two.stdout[-3000:]
    single, ranks = _params(tmp_path / "one.npz"), _params(tmp_path / "two.rank0.npz")
    for name in single:
        np.testing.assert_allclose(ranks[name], single[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
