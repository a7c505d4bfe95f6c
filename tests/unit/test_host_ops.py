"""fluid.layers.py_func (forward, gradient through backward_func, skipped inputs, errors) and
fluid.layers.Print (fluid's output lines, first_n, summarize), against fluid 1.8's outputs."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import ExecutionError, InvalidArgumentError
from tests.oracle_io import load

ORACLE = load("misc")


def tanh_fwd(x):
    return np.tanh(x)


def tanh_bwd(x, y, dy):
    return dy * (1 - np.square(y))


def test_py_func_forward_and_gradient_match_fluid():
    case = ORACLE["py_func"]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[2, 3], dtype="float32")
        x.stop_gradient = False
        out = main.global_block().create_var(name="py_out", dtype="float32", shape=[2, 3])
        fluid.layers.py_func(tanh_fwd, x, out, backward_func=tanh_bwd)
        loss = fluid.layers.reduce_sum(fluid.layers.scale(out, 3.0))
        grads = fluid.gradients([loss], [x])
    exe = fluid.Executor(fluid.CPUPlace())
    y, gx = exe.run(main, feed={"x": case["x"]}, fetch_list=[out, grads[0]])
    np.testing.assert_allclose(y, case["out"], rtol=1e-6)
    np.testing.assert_allclose(gx, case["x_grad"], rtol=1e-6)


def test_py_func_two_inputs_skip_vars_and_finite_differences():
    seen = []

    def fwd(a, b):
        return a * b, a + b

    def bwd(a, d_prod, d_sum):  # b and both outputs skipped
        seen.append(True)
        return d_prod * 2.0 + d_sum, None

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.data("a", [3], "float64")
        b = fluid.data("b", [3], "float64")
        a.stop_gradient = False
        block = main.global_block()
        p = block.create_var(name="p", dtype="float64", shape=[3])
        s = block.create_var(name="s", dtype="float64", shape=[3])
        fluid.layers.py_func(fwd, [a, b], [p, s], backward_func=bwd,
                             skip_vars_in_backward_input=[b, p, s])
        loss = fluid.layers.reduce_sum(p + s)
        (ga,) = fluid.gradients([loss], [a])
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([2.0, 2.0, 2.0])}
    got_p, got_ga = exe.run(main, feed=feed, fetch_list=[p, ga])
    np.testing.assert_allclose(got_p, [2.0, 4.0, 6.0])
    # d(sum(a*b + a + b))/da = b + 1 = 3 with b = 2; bwd says 2 * 1 + 1 = 3
    np.testing.assert_allclose(got_ga, [3.0, 3.0, 3.0])
    assert seen


def test_py_func_errors_name_the_problem():
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.data("x", [2], "float32")
        out = main.global_block().create_var(name="o", dtype="float32", shape=[2])
        with pytest.raises(InvalidArgumentError, match="func must be callable"):
            fluid.layers.py_func(3, x, out)
        with pytest.raises(InvalidArgumentError, match="neither in x nor in out"):
            fluid.layers.py_func(np.tanh, x, out, skip_vars_in_backward_input=[
                main.global_block().create_var(name="z", dtype="float32", shape=[2])])
        fluid.layers.py_func(lambda v: (v, v), x, out)
    with pytest.raises(ExecutionError, match=r"returned 2 value\(s\) but 1 output"):
        fluid.Executor().run(main, feed={"x": np.ones(2, "float32")})


def test_print_matches_fluid_lines(capsys):
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.data(name="px", shape=[2, 2], dtype="float32")
        y = fluid.layers.Print(x, message="hello", summarize=3, first_n=2)
    exe = fluid.Executor(fluid.CPUPlace())
    for _ in range(3):
        (got,) = exe.run(main, feed={"px": np.arange(4).reshape(2, 2).astype("float32")},
                         fetch_list=[y])
    np.testing.assert_array_equal(got, np.arange(4).reshape(2, 2))
    lines = capsys.readouterr().out.splitlines()
    want = ORACLE["print"]["lines"]
    assert len(lines) == 2 * len(want)  # first_n=2 of three runs
    assert lines[0].split("\t", 1)[1] == want[0]
    assert lines[1:len(want)] == want[1:]


def test_print_backward_phase_prints_the_gradient(capsys):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3], "float32")
        x.stop_gradient = False
        y = fluid.layers.Print(x, print_phase="backward", message="grad")
        (gx,) = fluid.gradients([fluid.layers.reduce_sum(fluid.layers.scale(y, 2.0))], [x])
    (got,) = fluid.Executor().run(main, feed={"x": np.ones(3, "float32")}, fetch_list=[gx])
    np.testing.assert_allclose(got, [2.0, 2.0, 2.0])
    out = capsys.readouterr().out
    assert out.count("\tgrad\t") == 1 and "\tdata: 2,2,2," in out
    with pytest.raises(InvalidArgumentError, match="print_phase"):
        fluid.layers.Print(x, print_phase="sideways")
