"""cvm, gather_tree, similarity_focus, crop's -1 and split/concat along a run-time axis: ops
against numpy references and finite differences (tests/op_harness.py), layers against stored
outputs of real fluid (PaddlePaddle 1.8.5, tests/oracle/make_leftover.py)."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_forward, check_op, rand, run_forward
from oracle.make_leftover import CASES, FEEDS
from oracle_io import load

import spmd.fluid as fluid
from spmd.errors import ExecutionError, InvalidArgumentError

ORACLE = load("leftover")
AXIS1 = np.array([1], "int32")


def _run(build, feeds):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        vs = {k: fluid.data(k, list(v.shape), str(v.dtype)) for k, v in feeds.items()}
        fetch = build(fluid, vs)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(prog, feed=feeds, fetch_list=fetch)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_fluid(name):
    feed_name, build = CASES[name]
    got = _run(build, FEEDS[feed_name])
    want = ORACLE[name]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"{name}[{i}]: shape {g.shape} != fluid's {w.shape}"
        assert g.dtype == w.dtype, f"{name}[{i}]: dtype {g.dtype} != fluid's {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{name}[{i}]")


# -- split / concat along an axis held in a tensor --------------------------------------------
def _split_ref(X, AxisTensor, sections=(), num=0, axis=0):
    pieces = np.split(X, np.cumsum(sections)[:-1] if sections else num, axis=int(AxisTensor[0]))
    return {"Out": pieces}


def _concat_ref(X, AxisTensor, axis=0):
    return {"Out": np.concatenate(X, axis=int(AxisTensor[0]))}


AXIS_CASES = [
    OpCase("split", {"X": rand(2, 4, 3), "AxisTensor": AXIS1}, _split_ref,
           attrs={"sections": [1, 3]}, name="split_axis_tensor_sections"),
    OpCase("split", {"X": rand(2, 3, 4), "AxisTensor": np.array([-1], "int64")}, _split_ref,
           attrs={"num": 2}, name="split_axis_tensor_negative"),
    OpCase("concat", {"X": [rand(2, 1, 3), rand(2, 2, 3)], "AxisTensor": AXIS1}, _concat_ref,
           name="concat_axis_tensor"),
]


@pytest.mark.parametrize("case", AXIS_CASES, ids=str)
def test_axis_tensor_ops(case):
    check_op(case)


def test_split_gradient_follows_the_run_time_axis():
    """The layer with dim a Variable: X's gradient is the pieces' gradients joined along the
    run-time axis (2), not along the attribute's 0."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 3, 4))
    w = [rng.uniform(0.5, 1.5, (2, 3, 1)), rng.uniform(0.5, 1.5, (2, 3, 3))]
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        xv = fluid.data("x", [2, 3, 4], "float64")
        xv.stop_gradient = False
        ws = [fluid.data(f"w{i}", list(wi.shape), "float64") for i, wi in enumerate(w)]
        parts = fluid.layers.split(xv, [1, 3], dim=fluid.layers.fill_constant([1], "int64", 2))
        loss = sum(fluid.layers.reduce_sum(p * wv) for p, wv in zip(parts, ws))
        (dx,) = fluid.gradients([loss], [xv])
    exe = fluid.Executor(fluid.CPUPlace())
    (got,) = exe.run(prog, feed={"x": x, "w0": w[0], "w1": w[1]}, fetch_list=[dx])
    np.testing.assert_allclose(got, np.concatenate(w, axis=2))


# -- cvm -----------------------------------------------------------------------------------------
def _cvm_x(n=3, width=5):
    x = rand(n, width)
    x[:, :2] = np.random.default_rng(5).integers(0, 9, (n, 2))  # show, click counts
    return x


def _cvm_ref(X, CVM, use_cvm=True):
    if not use_cvm:
        return {"Y": X[:, 2:]}
    y = X.copy()
    y[:, 0] = np.log(X[:, 0] + 1)
    y[:, 1] = np.log(X[:, 1] + 1) - y[:, 0]
    return {"Y": y}


@pytest.mark.parametrize("use_cvm", [True, False])
def test_cvm_forward_and_fluids_gradient_rule(use_cvm):
    x, show_clk = _cvm_x(), np.array([[1.0, 0.0], [4.0, 2.0], [0.0, 3.0]])
    check_forward(OpCase("cvm", {"X": x, "CVM": show_clk}, _cvm_ref, attrs={"use_cvm": use_cvm}))
    check_forward(OpCase("cvm", {"X": x, "CVM": show_clk}, _cvm_ref, attrs={"use_cvm": use_cvm}),
                  "float32", rtol=1e-5, atol=1e-6)
    # the embedding columns get Y's gradient (finite differences agree: Y copies them); the
    # show/click columns get CVM's values, fluid's rule for CTR training
    w = rand(3, 5 if use_cvm else 3)
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        xv = fluid.data("x", [3, 5], "float64")
        xv.stop_gradient = False
        y = fluid.layers.continuous_value_model(xv, fluid.data("sc", [3, 2], "float64"),
                                                use_cvm)
        (dx,) = fluid.gradients([y], [xv], target_gradients=[fluid.data("w", w.shape, "float64")])
    feed = {"x": x, "sc": show_clk, "w": w}
    (got,) = fluid.Executor(fluid.CPUPlace()).run(prog, feed=feed, fetch_list=[dx])
    np.testing.assert_allclose(got[:, :2], show_clk)
    np.testing.assert_allclose(got[:, 2:], w[:, 2:] if use_cvm else w)
    eps = 1e-6
    for j in range(2, 5):
        bump = np.zeros_like(x)
        bump[:, j] = eps
        numeric = (np.sum(_cvm_ref(x + bump, None, use_cvm)["Y"] * w)
                   - np.sum(_cvm_ref(x - bump, None, use_cvm)["Y"] * w)) / (2 * eps)
        np.testing.assert_allclose(got[:, j].sum(), numeric, rtol=1e-6)


def test_cvm_shape_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        sc = fluid.data("sc", [4, 2], "float32")
        with pytest.raises(InvalidArgumentError, match="2-D"):
            fluid.layers.continuous_value_model(fluid.data("x", [4, 2, 3], "float32"), sc)
        with pytest.raises(InvalidArgumentError, match=r"CVM must be \[N, 2\]"):
            fluid.layers.continuous_value_model(fluid.data("y", [4, 5], "float32"),
                                                fluid.data("bad", [4, 3], "float32"))


# -- gather_tree ---------------------------------------------------------------------------------
def _gather_tree_ref(Ids, Parents):
    out = np.empty_like(Ids)
    steps, batch, beam = Ids.shape
    for b in range(batch):
        for k in range(beam):
            parent = k
            for t in range(steps - 1, -1, -1):
                out[t, b, k] = Ids[t, b, parent]
                parent = Parents[t, b, parent]
    return {"Out": out}


def test_gather_tree_against_a_loop():
    rng = np.random.default_rng(9)
    for dtype in ("int32", "int64"):
        ids = rng.integers(0, 50, (5, 3, 4)).astype(dtype)
        parents = rng.integers(0, 4, (5, 3, 4)).astype(dtype)
        check_forward(OpCase("gather_tree", {"Ids": ids, "Parents": parents}, _gather_tree_ref))


def test_gather_tree_rejects_a_parent_outside_the_beam():
    ids = np.zeros((2, 1, 2), "int64")
    with pytest.raises(ExecutionError, match="beam indices"):
        run_forward(OpCase("gather_tree", {"Ids": ids, "Parents": ids + 2}, None,
                           outputs={"Out": 1}))


# -- similarity_focus ----------------------------------------------------------------------------
def test_similarity_focus_marks_one_per_row_and_column():
    x = np.random.default_rng(2).permutation(2 * 4 * 3 * 5).reshape(2, 4, 3, 5) / 10.0
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        xv = fluid.data("x", [2, 4, 3, 5], "float64")
        out = fluid.layers.similarity_focus(xv, axis=1, indexes=[2])
    (got,) = fluid.Executor(fluid.CPUPlace()).run(prog, feed={"x": x}, fetch_list=[out])
    assert got.shape == x.shape and got.dtype == x.dtype
    for b in range(2):
        mask = got[b, 0]
        assert (got[b] == mask).all()  # broadcast along axis 1
        assert mask.sum() == 3 and (mask.sum(axis=0) <= 1).all() and (mask.sum(axis=1) == 1).all()
        assert mask.reshape(-1)[np.argmax(x[b, 2])] == 1  # the largest value is always taken


def test_similarity_focus_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [2, 3, 2, 2], "float32")
        with pytest.raises(InvalidArgumentError, match="axis must be 1, 2 or 3"):
            fluid.layers.similarity_focus(x, axis=0, indexes=[0])
        with pytest.raises(InvalidArgumentError, match="non-empty"):
            fluid.layers.similarity_focus(x, axis=1, indexes=[])
        with pytest.raises(InvalidArgumentError, match=r"\[0, 2\]"):
            fluid.layers.similarity_focus(x, axis=1, indexes=[3])


# -- crop with -1 --------------------------------------------------------------------------------
def test_crop_minus_one_only_in_the_batch_dim():
    """fluid 1.8's crop reads -1 in shape[0] as X's batch size and fails on -1 elsewhere
    (its kernel allocates a negative size); an offset that would push the batch past X's end
    reads outside X in fluid, here it is an error."""
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [3, 4], "float32")
        with pytest.raises(InvalidArgumentError, match="-1 only in dim 0"):
            fluid.layers.crop(x, shape=[2, -1], offsets=[0, 1])
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        x = fluid.data("x", [-1, 4], "float32")
        out = fluid.layers.crop(x, shape=[-1, 2], offsets=[1, 0])
    with pytest.raises(ExecutionError, match="must fit inside X"):
        fluid.Executor(fluid.CPUPlace()).run(prog, feed={"x": np.zeros((3, 4), "float32")},
                                             fetch_list=[out])
