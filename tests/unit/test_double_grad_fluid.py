"""Gradients of gradients equal fluid 1.8.5's (tests/oracle/make_double_grad.py ran the same
programs there: fluid.gradients over an earlier fluid.gradients' grad ops, through relu,
leaky_relu, elu, sqrt, square, elementwise add/sub/mul/div with broadcasting, mul, conv2d,
reshape, reduce_mean and instance_norm).

And where fluid's while_loop gradient is not the derivative (Paddle's test_while_loop_op.py
expects its number at line 235), what fluid gives, what spmd gives, and why."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from tests.oracle.make_double_grad import CASES, FEEDS, WHILE_CASES, build_while, declare
from tests.oracle_io import load

ORACLE = load("double_grad")


# where fluid 1.8.5's second gradient is not the derivative (see the test below)
FLUID_WRONG = {"activations_both"}


def _run_case(name, feeds=FEEDS):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup), fluid.unique_name.guard():
        fetch = CASES[name](fluid, declare(fluid, FEEDS))
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    return exe.run(prog, feed=feeds, fetch_list=fetch, scope=scope)


@pytest.mark.parametrize("name", sorted(set(CASES) - FLUID_WRONG))
def test_second_gradients_equal_fluid(name):
    got = _run_case(name)
    assert len(got) == len(ORACLE[name])
    for k, (g, want) in enumerate(zip(got, ORACLE[name])):
        # (fluid keeps float attributes in float32: elu's alpha=0.7 is 0.699999988 there)
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-9, err_msg=f"{name}[{k}]")


def test_second_gradient_where_fluid_is_not_the_derivative():
    """out = sum(elu(x) sqrt(z) + leaky_relu(x) x / z + relu(x) z^2), (dx, dz) its gradients,
    g = sum(dx^2) + sum(dz x): fluid 1.8.5 gives dx and dz as spmd does, but its gradient
    of g is not g's (central differences of g, computed from the first gradients, say so);
    each term alone, or g = sum(dz x) alone, it gets right (the cases above). spmd's is
    the derivative."""
    got = _run_case("activations_both")
    want = ORACLE["activations_both"]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)  # the first gradients agree
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)

    def g(feeds):
        dx, dz = _run_case("activations_both", feeds)[:2]
        return float(np.sum(dx * dx) + np.sum(dz * feeds["x"]))

    eps = 1e-6
    for k, name in enumerate(("x", "z")):
        numeric = np.zeros_like(FEEDS[name])
        for j in range(numeric.size):
            plus, minus = dict(FEEDS), dict(FEEDS)
            p, m = FEEDS[name].copy().reshape(-1), FEEDS[name].copy().reshape(-1)
            p[j] += eps
            m[j] -= eps
            plus[name], minus[name] = p.reshape(numeric.shape), m.reshape(numeric.shape)
            numeric.reshape(-1)[j] = (g(plus) - g(minus)) / (2 * eps)
        np.testing.assert_allclose(got[2 + k], numeric, rtol=1e-6, atol=1e-7)
    assert not np.allclose(want[2], got[2], rtol=1e-3)  # fluid's d g / d x


def _while(case):
    i0, x0, bound, kind = WHILE_CASES[case]
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup), fluid.unique_name.guard():
        mean, i, x = build_while(fluid, bound, kind)
    feed = {"i": np.array([i0], "float32"), "x": np.array([x0], "float32")}
    return fluid.Executor(fluid.CPUPlace()).run(
        prog, feed=feed, fetch_list=[mean.name, i.grad_name, x.grad_name], scope=fluid.Scope())


def _counters(i0, bound):
    return np.arange(i0, bound, 1.0)  # the loop's i at each iteration


@pytest.mark.parametrize("case", sorted(WHILE_CASES))
def test_while_loop_gradient_where_fluid_is_not_the_derivative(case):
    """x is overwritten every iteration, so only the last iteration's x reaches the mean.
    fluid 1.8.5's while_grad hands x's gradient to every iteration instead: for the body
    x = i * i it gives i the sum of 2 i over all iterations (Paddle's test expects 110 for
    i = 1..10; the last iteration alone gives 20) and the initial x, which never reaches the
    mean, gradient 1; for x = x * i it gives the initial x gradient 0, though the mean is
    x0 * prod(i). spmd gives x0 its derivative, and i the one with the counter's increments
    held constant (increment carries no gradient, in fluid as here): 0 for x = i * i, whose
    last i is the initial one incremented; mean / i0 for x = x * i."""
    i0, x0, bound, kind = WHILE_CASES[case]
    counters = _counters(i0, bound)
    fluid_mean, fluid_di, fluid_dx = ORACLE["while_" + case]
    mean, di, dx = _while(case)
    np.testing.assert_allclose(mean, fluid_mean)  # the forward agrees
    if kind == "square":
        np.testing.assert_allclose(fluid_di, [np.sum(2 * counters)])  # fluid: every iteration
        np.testing.assert_allclose(fluid_dx, [1.0])
        np.testing.assert_allclose(di, [0.0])
        np.testing.assert_allclose(dx, [0.0])  # the initial x never reaches the mean
    else:
        final = x0 * np.prod(counters)
        np.testing.assert_allclose(mean, [final])
        np.testing.assert_allclose(fluid_dx, [0.0])
        np.testing.assert_allclose(dx, [final / x0])  # d mean / d x0
        np.testing.assert_allclose(di, [final / i0])
