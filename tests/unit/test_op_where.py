"""The `where` op (Out = X where Condition else Y) and paddle.where: forward against numpy,
gradients against finite differences, the op against fluid 1.8.5 and paddle.where (which
broadcasts and takes Python numbers) against paddle 3.3.1 (tests/oracle/make_where.py)."""
from __future__ import annotations

import numpy as np
import pytest
from fluid_compare import assert_array_like_fluid, assert_refuses_like_fluid
from op_harness import RNG, OpCase, check_op, run_forward
from oracle.make_where import FEEDS, LAYER_CASES, OP_CASES, run_layer_case, run_op_case
from oracle_io import load

import spmd
import spmd.fluid as fluid
from spmd.errors import ExecutionError, InvalidArgumentError

FLUID18, PADDLE33 = load("where"), load("where_paddle")


def _ref(Condition, X, Y):
    return {"Out": np.where(Condition, X, Y)}


def _case(shape, name):
    cond = RNG.uniform(size=shape) > 0.5
    return OpCase("where", {"Condition": cond, "X": RNG.uniform(-1, 1, shape),
                            "Y": RNG.uniform(-1, 1, shape)}, ref=_ref, name=name)


@pytest.mark.parametrize("case", [_case((3, 4), "where_2d"), _case((2, 3, 2), "where_3d"),
                                  _case((5,), "where_1d")], ids=str)
def test_op_forward_and_gradients(case):
    check_op(case)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_op_integer_inputs_keep_their_dtype(dtype):
    cond = np.array([[True, False, True], [False, False, True]])
    x, y = np.arange(6).reshape(2, 3).astype(dtype), -np.ones((2, 3), dtype)
    got = run_forward(OpCase("where", {"Condition": cond, "X": x, "Y": y}, ref=_ref))["Out"][0]
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.where(cond, x, y))


def _compare(name, got, want):
    if "error" in want or "error" in got:
        assert_refuses_like_fluid(name, got.get("error", "ok"), want.get("error", "ok"))
        return
    assert got["shape"] == want["shape"], f"{name}: static shape {got['shape']}"
    assert got["wrt"] == want["wrt"] and len(got["grads"]) == len(want["grads"])
    for kind in ("outs", "grads"):
        for i, (g, w) in enumerate(zip(got[kind], want[kind])):
            assert_array_like_fluid(g, w, f"{name} {kind}[{i}]", tol=1e-6)


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_op_matches_fluid18(name):
    _compare(name, run_op_case(fluid, name), FLUID18[name])


@pytest.mark.parametrize("name", sorted(LAYER_CASES))
def test_paddle_where_matches_paddle33(name):
    _compare(name, run_layer_case(fluid, spmd, name), PADDLE33[name])


def _build(fn, **feeds):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        vs = {k: fluid.data(k, list(v.shape), str(v.dtype)) for k, v in feeds.items()}
        out = fn(**vs)
    return prog, out


def _append_where(c, x, y):
    block = fluid.default_main_program().current_block()
    out = block.create_var(name="out", dtype=x.dtype)
    block.append_op("where", {"Condition": [c], "X": [x], "Y": [y]}, {"Out": [out]})
    return out


@pytest.mark.parametrize("feeds, match", [
    (("c1", "x", "y"), "must have the same shape \\(paddle.where broadcasts them first\\)"),
    (("ci", "x", "y"), "where takes a bool Condition"),
    (("c", "x", "yd"), "cast one of them"),
])
def test_op_refusals_say_what_to_do(feeds, match):
    with pytest.raises(InvalidArgumentError, match=match):
        _build(_append_where, **dict(zip("cxy", (FEEDS[k] for k in feeds))))


def test_paddle_where_batch_dim_broadcast():
    # condition [-1, 1] against x [-1, 4] and a number: shapes known only at run time
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        c = fluid.data("c", [-1, 1], "bool")
        x = fluid.data("x", [-1, 4], "float32")
        out = spmd.where(c, x, 0.0)
    assert list(out.shape) == [-1, 4]
    got, = fluid.Executor(fluid.CPUPlace()).run(
        prog, feed={"c": FEEDS["c1"], "x": FEEDS["x"]}, fetch_list=[out])
    np.testing.assert_array_equal(got, np.where(FEEDS["c1"], FEEDS["x"], np.float32(0)))


def test_paddle_where_without_x_and_y_is_nonzero():
    prog, outs = _build(lambda c: spmd.where(c), c=FEEDS["c"])
    got = fluid.Executor(fluid.CPUPlace()).run(prog, feed={"c": FEEDS["c"]},
                                               fetch_list=list(outs))
    for g, want in zip(got, np.nonzero(FEEDS["c"])):
        np.testing.assert_array_equal(g, want[:, None])


@pytest.mark.parametrize("args, match", [
    (("c", "x", None), "both x and y, or neither"),
    (("c", "x", "yd"), "cast one of them"),
    (("c", "i", 0.5), "not a whole number"),
    (("ci", "x", "y"), "must have dtype in \\['bool'\\]"),
])
def test_paddle_where_refuses_with_a_reason(args, match):
    names = [a for a in args if isinstance(a, str)]

    def fn(**vs):
        return spmd.where(*[vs[a] if isinstance(a, str) else a for a in args])

    with pytest.raises(InvalidArgumentError, match=match):
        _build(fn, **{k: FEEDS[k] for k in names})


def test_op_refuses_feeds_of_different_sizes_at_run_time():
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        c = fluid.data("c", [-1, 4], "bool")
        x = fluid.data("x", [-1, 4], "float32")
        out = _append_where(c, x, x)
    with pytest.raises(ExecutionError, match="'where' failed: .*must have the same shape"):
        fluid.Executor(fluid.CPUPlace()).run(prog, feed={"c": FEEDS["c"][:2], "x": FEEDS["x"]},
                                             fetch_list=[out])
