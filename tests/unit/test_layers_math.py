"""fluid.layers math / activation / logic / reduce / linalg builders and Variable operators
against stored outputs of real fluid (PaddlePaddle 1.8.5, tests/oracle/make_math.py), plus
builder-level checks (signatures, in-place increment, errors)."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_math import CASES, FEEDS
from oracle_io import load

import spmd.fluid as fluid
from spmd.core.variable import Variable
from spmd.errors import InvalidArgumentError

ORACLE = load("math")


def _run(build, feeds=FEEDS):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        vs = {k: fluid.data(k, list(v.shape), str(v.dtype)) for k, v in feeds.items()}
        fetch = build(fluid.layers, vs)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(prog, feed=feeds, fetch_list=fetch)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_fluid(name):
    got = _run(CASES[name])
    want = ORACLE[name]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"{name}[{i}]: shape {g.shape} != fluid's {w.shape}"
        assert g.dtype == w.dtype, f"{name}[{i}]: dtype {g.dtype} != fluid's {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=f"{name}[{i}]")


def test_increment_in_place_writes_x():
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        i = fluid.layers.fill_constant([1], "int64", 5)
        j = fluid.layers.increment(i)
    assert j is i
    (got,) = fluid.Executor(fluid.CPUPlace()).run(prog, fetch_list=[i])
    assert np.asarray(got).tolist() == [6]


def test_compare_writes_cond():
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        x = fluid.data("x", [2], "float32")
        cond = fluid.layers.create_global_var([2], False, "bool")
        out = fluid.layers.less_than(x, fluid.layers.fill_constant([2], "float32", 1.0),
                                     cond=cond)
    assert out is cond
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    (got,) = exe.run(prog, feed={"x": np.array([0.0, 2.0], "float32")}, fetch_list=[cond])
    assert np.asarray(got).tolist() == [True, False]


def test_prelu_learns_alpha():
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        x = fluid.data("x", [2, 3], "float32")
        loss = fluid.layers.reduce_sum(fluid.layers.prelu(x, "channel"))
        fluid.optimizer.SGD(0.1).minimize(loss)
    (alpha,) = prog.global_block().all_parameters()
    assert list(alpha.shape) == [1, 3, 1, 1]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feed = {"x": np.array([[-1.0, 2.0, -3.0], [-1.0, -1.0, 1.0]], "float32")}
    exe.run(prog, feed=feed)
    (a,) = exe.run(prog, feed=feed, fetch_list=[alpha])
    # d loss / d alpha_c = the sum of channel c's negative inputs; two SGD steps ran (the
    # fetch reads alpha after the second)
    np.testing.assert_allclose(np.asarray(a).reshape(-1), 0.25 - 0.1 * 2 * np.array(
        [-2.0, -1.0, -3.0]), rtol=1e-6)


@pytest.mark.parametrize("build, match", [
    (lambda L, x: L.prelu(x, "row"), "mode"),
    (lambda L, x: L.clamp(x), "min, max"),
    (lambda L, x: L.t(L.reshape(x, [1, 2, 3])), "rank"),
    (lambda L, x: L.trace(x, dim1=1, dim2=-1), "same axis"),
    (lambda L, x: L.logical_and(x, x), "bool"),
    (lambda L, x: L.reduce_any(x), "bool"),
    (lambda L, x: L.mish(x, threshold=0), "threshold"),
])
def test_builder_errors(build, match):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [2, 3], "float32")
        with pytest.raises(InvalidArgumentError, match=match):
            build(fluid.layers, x)


def test_variable_eq_is_an_op_and_hash_stays_identity():
    # fluid 1.8.5's math_op_patch: `==` / `!=` build equal / not_equal; hashing is by identity
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float32")
        y = fluid.data("y", [2, 3], "float32")
        eq, ne = x == y, x != 0
    assert isinstance(eq, Variable) and isinstance(ne, Variable) and eq.dtype == "bool"
    assert [op.type for op in main.global_block().ops] == ["equal", "fill_constant", "not_equal"]
    assert {x: 1, y: 2}[x] == 1 and len({x, y, x}) == 2 and (x == None) is False  # noqa: E711
