"""Sparse gradients with the optimizers, regularizers and clips of tests/oracle/
make_sparse_rows.py against fluid 1.8.5's own runs of the same program (3 steps, two fixed
tables, one looked up twice): spmd's sparse run gives fluid's numbers, and where fluid 1.8.5's
sparse kernel is wrong (rmsprop's row look-up) or missing (decayed_adagrad), fluid's dense
result, which is the semantics of those optimizers."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import spmd.fluid as fluid

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))
from make_sparse_rows import optimizers, train  # noqa: E402

from tests.oracle_io import load  # noqa: E402

CASES = load("sparse_rows")
OPTIMIZERS = optimizers(fluid)


def _close(got, case, what):
    np.testing.assert_allclose(got["losses"], case["losses"], rtol=1e-5, atol=1e-6,
                               err_msg=f"{what}: losses")
    for name, value in case["params"].items():
        np.testing.assert_allclose(got["params"][name], value, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{what}: {name}")


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_dense_runs_match_fluid(name):
    _close(train(fluid, OPTIMIZERS[name], False), CASES[f"train/{name}/dense"], name)


# fluid 1.8.5's sparse run of these is its own: row-wise (lazy adam), or equal to its dense
# run (a regularizer makes the gradient dense, as fluid's append_regularization_ops sums the
# SelectedRows with the dense decay term; clipping works on the merged rows)
FLUID_SPARSE = ["adagrad_global_norm", "adagrad_l2", "lazy_adam_l2", "sgd_clip_norm",
                "sgd_clip_value", "sgd_l1", "sgd_l2"]


@pytest.mark.parametrize("name", FLUID_SPARSE)
def test_sparse_runs_match_fluids_sparse_runs(name):
    _close(train(fluid, OPTIMIZERS[name], True), CASES[f"train/{name}/sparse"], name)


def test_a_regularizer_decays_every_row_of_a_sparse_table_as_fluid_does():
    """fluid 1.8.5: sum(SelectedRows, scale(param)) is a dense gradient, so rows no batch
    looked up (3, 5, 6) are decayed too; its sparse and dense runs agree."""
    got = np.asarray(train(fluid, OPTIMIZERS["sgd_l2"], True)["params"]["table_a"])
    fluid_sparse = CASES["train/sgd_l2/sparse"]["params"]["table_a"]
    from make_sparse import init

    never_looked_up = [3, 5, 6]
    initial = init(fluid_sparse.shape, 0)
    assert np.abs(fluid_sparse[never_looked_up] - initial[never_looked_up]).min() > 0
    np.testing.assert_allclose(got, fluid_sparse, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["rmsprop", "rmsprop_centered"])
def test_rmsprop_sparse_gives_fluids_dense_result_where_fluids_sparse_kernel_misses_rows(name):
    """fluid 1.8.5's sparse rmsprop functor finds a row's gradient by binary search in the
    unmerged, unsorted ids of the last batch [2, 1, 8, 4] and misses rows 2 and 4 there;
    RMSProp's semantics are dense (every row's mean square decays), and spmd gives them."""
    dense, sparse = CASES[f"train/{name}/dense"], CASES[f"train/{name}/sparse"]
    diff = np.abs(dense["params"]["table_a"] - sparse["params"]["table_a"]).max(axis=1)
    assert np.nonzero(diff > 1e-4)[0].tolist() == [2, 4]
    _close(train(fluid, OPTIMIZERS[name], True), dense, f"{name} sparse vs fluid dense")


def test_decayed_adagrad_takes_a_sparse_gradient_with_its_dense_semantics():
    assert "decayed_adagrad" in CASES["train/decayed_adagrad/sparse"]["error"]
    _close(train(fluid, OPTIMIZERS["decayed_adagrad"], True),
           CASES["train/decayed_adagrad/dense"], "decayed_adagrad sparse vs fluid dense")
