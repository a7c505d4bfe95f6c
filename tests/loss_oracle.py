"""Running a stored loss/metric case (tests/oracle/make_loss.py) in spmd and comparing every
fetch with what real fluid (PaddlePaddle 1.8.5) produced for it. Shared by the loss, metric
and numeric-guard tests (a module of its own so that any test file, also tests/gpu's loader,
can import it)."""
from __future__ import annotations

import numpy as np
from oracle.make_loss import run_case
from oracle_io import load

import spmd.fluid as fluid

ORACLE = load("loss")


def assert_matches_fluid(name, rtol=1e-5, atol=1e-6):
    got, want = run_case(fluid, name), ORACLE[name]
    assert len(got) == len(want), f"{name}: {len(got)} runs, fluid made {len(want)}"
    for r, (got_run, want_run) in enumerate(zip(got, want)):
        assert len(got_run) == len(want_run)
        for i, (g, w) in enumerate(zip(got_run, want_run)):
            assert g.shape == w.shape, f"{name} run {r} [{i}]: shape {g.shape} != {w.shape}"
            assert g.dtype == w.dtype, f"{name} run {r} [{i}]: dtype {g.dtype} != {w.dtype}"
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol,
                                       err_msg=f"{name} run {r} fetch {i}")
