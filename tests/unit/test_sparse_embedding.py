"""embedding(is_sparse=True): the table's gradient is SelectedRows (the looked-up rows only),
and the optimizers apply it as fluid 1.8 does: SGD, Momentum, Adam and Adagrad give the dense
result; lazy Adam and FTRL change only the looked-up rows (checked against numpy)."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.core.selected_rows import SelectedRows
from spmd.kernels.registry import run_kernel

VOCAB, DIM = 12, 3
IDS = [np.array([[1], [4], [1], [7]]), np.array([[4], [0], [0], [9]]),
       np.array([[2], [1], [11], [4]])]


def train(optimizer, is_sparse: bool, steps=3):
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 3
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=is_sparse)
        emb2 = fluid.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=is_sparse,
                                      param_attr="shared")
        emb3 = fluid.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=is_sparse,
                                      param_attr="shared")  # one table looked up twice
        loss = fluid.layers.mean(fluid.layers.square(emb + emb2 * emb3 - 0.5))
        optimizer().minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(start, scope=scope)
    for i in range(steps):
        exe.run(main, feed={"ids": IDS[i % len(IDS)]}, fetch_list=[loss], scope=scope)
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in main.global_block().all_parameters()}


DENSE_EQUAL = {
    "sgd": lambda: fluid.optimizer.SGD(0.3),
    "momentum": lambda: fluid.optimizer.Momentum(0.3, momentum=0.9),
    "nesterov": lambda: fluid.optimizer.Momentum(0.3, momentum=0.9, use_nesterov=True),
    "adam": lambda: fluid.optimizer.Adam(0.1),
    "adagrad": lambda: fluid.optimizer.Adagrad(0.3),
}


@pytest.mark.parametrize("name", sorted(DENSE_EQUAL))
def test_sparse_gradients_give_the_dense_result(name):
    dense = train(DENSE_EQUAL[name], False)
    sparse = train(DENSE_EQUAL[name], True)
    for key, value in dense.items():
        np.testing.assert_allclose(sparse[key], value, rtol=1e-6, atol=1e-7, err_msg=key)


def test_the_gradient_is_selected_rows_of_the_looked_up_ids():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        fluid.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=True, padding_idx=0)
    op = next(op for op in main.global_block().ops if op.type == "lookup_table")
    dout = np.arange(12.0).reshape(4, 3)
    g = run_kernel("lookup_table_grad", np, {"W": np.zeros((VOCAB, DIM)), "Ids": IDS[1],
                                             "Out@GRAD": dout}, op.attrs, {"W@GRAD"})["W@GRAD"]
    assert isinstance(g, SelectedRows) and g.height == VOCAB
    assert g.rows.tolist() == [4, 9]  # the padding id 0 gets no gradient; repeats are kept
    np.testing.assert_array_equal(g.value, dout[[0, 3]])


def test_fetching_a_sparse_gradient_gives_its_dense_table():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=True)
        loss = fluid.layers.reduce_sum(emb)
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(start, scope=scope)
    table = main.global_block().all_parameters()[0].name
    (g,) = exe.run(main, feed={"ids": IDS[0]}, fetch_list=[table + "@GRAD"], scope=scope)
    want = np.zeros((VOCAB, DIM))
    want[1], want[4], want[7] = 2, 1, 1
    np.testing.assert_array_equal(g, want)


def _sparse_case(rows, values):
    return SelectedRows(np.array(rows), np.array(values, dtype=np.float64), VOCAB)


def test_lazy_adam_changes_only_the_looked_up_rows():
    rng = np.random.default_rng(0)
    p, m1, m2 = rng.normal(size=(3, VOCAB, DIM))
    m2 = np.abs(m2)
    g = _sparse_case([5, 2, 5], rng.normal(size=(3, DIM)))
    ins = {"Param": p, "Grad": g, "Moment1": m1, "Moment2": m2,
           "LearningRate": np.array([0.1]), "Beta1Pow": np.array([0.9]),
           "Beta2Pow": np.array([0.999])}
    attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "lazy_mode": True}
    out = run_kernel("adam", np, ins, attrs, {"ParamOut", "Moment1Out", "Moment2Out"})
    merged = g.to_dense(np)
    for r in range(VOCAB):
        if r in (2, 5):
            want_m1 = 0.9 * m1[r] + 0.1 * merged[r]
            want_m2 = 0.999 * m2[r] + 0.001 * merged[r] ** 2
            lr_t = 0.1 * np.sqrt(1 - 0.999) / (1 - 0.9)
            np.testing.assert_allclose(out["ParamOut"][r],
                                       p[r] - lr_t * want_m1 / (np.sqrt(want_m2) + 1e-8))
            np.testing.assert_allclose(out["Moment1Out"][r], want_m1)
        else:  # untouched rows keep their values and moments
            np.testing.assert_array_equal(out["ParamOut"][r], p[r])
            np.testing.assert_array_equal(out["Moment2Out"][r], m2[r])
    assert not np.shares_memory(out["ParamOut"], p)  # kernels never modify their inputs


def test_ftrl_changes_only_the_looked_up_rows():
    rng = np.random.default_rng(1)
    p = rng.normal(size=(VOCAB, DIM))
    sq, lin = np.abs(rng.normal(size=(VOCAB, DIM))) + 0.1, rng.normal(size=(VOCAB, DIM))
    g = _sparse_case([3, 3, 8], rng.normal(size=(3, DIM)))
    ins = {"Param": p, "Grad": g, "SquaredAccumulator": sq, "LinearAccumulator": lin,
           "LearningRate": np.array([0.05])}
    attrs = {"l1": 0.01, "l2": 0.02, "lr_power": -0.5}
    out = run_kernel("ftrl", np, ins, attrs, {"ParamOut", "SquaredAccumOut", "LinearAccumOut"})
    dense = run_kernel("ftrl", np, dict(ins, Grad=g.to_dense(np)), attrs,
                       {"ParamOut", "SquaredAccumOut", "LinearAccumOut"})
    for r in range(VOCAB):
        if r in (3, 8):  # a looked-up row: fluid's dense formula on the merged gradient
            np.testing.assert_allclose(out["ParamOut"][r], dense["ParamOut"][r])
            np.testing.assert_allclose(out["LinearAccumOut"][r], dense["LinearAccumOut"][r])
        else:
            np.testing.assert_array_equal(out["ParamOut"][r], p[r])
            np.testing.assert_array_equal(out["SquaredAccumOut"][r], sq[r])


WITH_EXTRAS = {
    "l2_decay": lambda: fluid.optimizer.SGD(0.3, regularization=fluid.regularizer.L2Decay(0.1)),
    "global_norm": lambda: fluid.optimizer.SGD(
        0.3, grad_clip=fluid.clip.GradientClipByGlobalNorm(0.01)),
    "by_value": lambda: fluid.optimizer.Momentum(
        0.3, 0.9, grad_clip=fluid.clip.GradientClipByValue(0.01)),
    "by_norm": lambda: fluid.optimizer.Adam(0.1, grad_clip=fluid.clip.GradientClipByNorm(0.01)),
}


@pytest.mark.parametrize("name", sorted(WITH_EXTRAS))
def test_regularization_and_clipping_of_sparse_gradients_give_the_dense_result(name):
    dense = train(WITH_EXTRAS[name], False)
    sparse = train(WITH_EXTRAS[name], True)
    for key, value in dense.items():
        np.testing.assert_allclose(sparse[key], value, rtol=1e-6, atol=1e-7, err_msg=key)
