"""examples/detection/yolov3_tiny.py, the model zoo's YOLOv3 shrunk: one process starts with
fluid 1.8.5's losses for the same initial parameters and data (stored by
tests/oracle/make_detection_roi.py, which runs this very file with its import line switched),
and 2 ranks under mpiexec (each on half of every batch, batch_norm synchronized) end with the
parameters of the one process."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
from mpirun import ROOT, run_mpi
from oracle_io import load

EXAMPLE = "examples/detection/yolov3_tiny.py"
FLUID = load("detection_roi")["yolov3_tiny_example"]


def _saved(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def test_one_process_losses_equal_fluid_and_two_ranks_equal_one(tmp_path):
    steps = int(FLUID["steps"])
    one, two = tmp_path / "one.npz", tmp_path / "two.npz"
    args = [EXAMPLE, "--steps", str(steps), "--save"]
    # one BLAS thread, as run_mpi gives each rank: the same summation order in the convolutions
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    res = subprocess.run([sys.executable, *args, str(one)], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-4000:]
    assert "(1 rank)" in res.stdout, res.stdout[-2000:]
    single = _saved(one)
    np.testing.assert_allclose(single["losses"], FLUID["losses"], rtol=2e-6,
                               err_msg="first losses against fluid 1.8.5's")
    assert single["losses"][-1] < 0.8 * single["losses"][0], single["losses"]

    res = run_mpi(2, [*args, str(two)], timeout=300)
    assert res.returncode == 0, res.stdout[-4000:]
    assert res.stdout.count("first loss") == 1 and "(2 ranks)" in res.stdout, res.stdout
    ranks = _saved(two)
    params = sorted(k for k in single if k != "losses")
    assert params and sorted(k for k in ranks if k != "losses") == params
    # float32: 2 ranks sum each batch_norm statistic and gradient in another order than one
    # process; after 4 steps the parameters agree to ~1e-5 of their scale (1e-4 allowed)
    for name in params:
        scale = max(float(np.abs(single[name]).max()), 1e-3)
        np.testing.assert_allclose(ranks[name], single[name], rtol=1e-4, atol=1e-4 * scale,
                                   err_msg=f"{name}: 2 ranks against 1 process")
