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


def _lazy_adam_with_fluids_powers(make_opt):
    """3 steps of the make_sparse.py program with lazy Adam, the tables' beta powers started
    one step ahead: fluid 1.8.5's sparse adam kernel writes Beta1PowOut / Beta2PowOut (the
    same variables as its inputs) before its row functor reads Beta1Pow / Beta2Pow, so each
    of its sparse steps uses the powers of the next one (adam_op.h); the dense fc keeps its
    own. The rows it updates, and how, are otherwise spmd's."""
    from make_sparse import IDS, Y

    got = {}

    def shift_powers(scope, main):
        for v in main.list_vars():
            if v.name.startswith("table") and "_pow_acc" in v.name:
                beta = np.float32(0.9 if "beta1" in v.name else 0.999)
                tensor = scope.find_var(v.name).get_tensor()
                tensor.set(np.asarray(tensor) * beta, fluid.CPUPlace())

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _sparse_program(make_opt)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    shift_powers(scope, main)
    losses = []
    for ids_v, y_v in zip(IDS, Y):
        (out,) = exe.run(main, feed={"ids": ids_v, "y": y_v}, fetch_list=[loss], scope=scope)
        losses.append(float(np.asarray(out).reshape(-1)[0]))
    got["losses"] = losses
    got["params"] = {n: np.array(scope.find_var(n).get_tensor())
                     for n in ("table_a", "table_b", "fc_w", "fc_b")}
    return got


def _sparse_program(make_opt):
    from make_sparse import DIM, VOCAB, init

    def attr(name, shape, offset):
        return fluid.ParamAttr(name=name, initializer=fluid.initializer.NumpyArrayInitializer(
            init(shape, offset)))

    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    y = fluid.layers.data(name="y", shape=[1], dtype="float32")
    a = fluid.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=True,
                               param_attr=attr("table_a", [VOCAB, DIM], 0))
    b1 = fluid.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=True,
                                param_attr=attr("table_b", [VOCAB, DIM], 1))
    b2 = fluid.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=True, param_attr="table_b")
    h = fluid.layers.concat([a, b1 * b2], axis=1)
    pred = fluid.layers.fc(h, 1, param_attr=attr("fc_w", [2 * DIM, 1], 2),
                           bias_attr=attr("fc_b", [1], 3))
    loss = fluid.layers.reduce_mean(fluid.layers.square(pred - y))
    make_opt().minimize(loss)
    return loss


def test_lazy_adam_rows_are_fluids_given_its_kernels_beta_powers():
    """spmd's lazy Adam updates the rows fluid 1.8.5's does, by the same formula: started
    from the powers fluid's sparse kernel reads, it gives fluid's stored sparse runs (losses
    and every parameter), plain and with a global-norm clip of the rows."""
    fluid_sparse = load("sparse")["train/lazy_adam/sparse"]
    _close(_lazy_adam_with_fluids_powers(lambda: fluid.optimizer.Adam(0.1, lazy_mode=True)),
           fluid_sparse, "lazy adam, fluid's powers")
    clipped = lambda: fluid.optimizer.Adam(  # noqa: E731
        0.1, lazy_mode=True, grad_clip=fluid.clip.GradientClipByGlobalNorm(0.05))
    _close(_lazy_adam_with_fluids_powers(clipped), CASES["train/lazy_adam_global_norm/sparse"],
           "lazy adam + global norm clip, fluid's powers")
