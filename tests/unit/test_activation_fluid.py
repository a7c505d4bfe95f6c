"""Activation layers at non-default attributes against stored outputs of real fluid
(PaddlePaddle 1.8.5, tests/oracle/make_activation.py): values and gradients on a grid that
includes each op's kinks.

Where fluid 1.8's gradient is not the derivative of its own forward (hard_swish, soft_relu
and mish at non-default thresholds, leaky_relu with alpha outside [0, 1]), spmd keeps the
true derivative; DELIBERATE says where, and the test checks fluid's numbers everywhere else
and spmd's against the derivative there. fluid's round treats a half by its position in the
tensor; spmd rounds every half away from zero.
"""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_activation import CASES, case_input, run_case
from oracle_io import load

import spmd.fluid as fluid

ORACLE = load("activation")


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _mish_deriv(x, t):
    sp = np.where(x > t, x, np.where(x < -t, np.exp(x), np.logaddexp(0.0, x)))
    dsp = np.where(x > t, 1.0, np.where(x < -t, np.exp(x), _sig(x)))
    th = np.tanh(sp)
    return th + x * (1 - th * th) * dsp


# name -> (where spmd's gradient differs from fluid's, the true derivative there)
DELIBERATE = {
    # fluid: 1 above the threshold; the forward's slope there is threshold / scale = 0.8
    "hard_swish": (lambda x: x + 2.0 >= 4.0, lambda x: np.full_like(x, 0.8)),
    # fluid masks on out: sigmoid(-3) below -3; the forward is flat there
    "soft_relu": (lambda x: x <= -3.0, lambda x: np.zeros_like(x)),
    # fluid's 1 - exp(-sp) outside [-3, 3] is not the slope of its thresholded softplus
    "mish": (lambda x: np.abs(x) > 3.0, lambda x: _mish_deriv(x, 3.0)),
    # fluid's forward is max(x, alpha * x); its gradient (1 where out > 0) is not its slope
    "leaky_relu_neg_alpha": (lambda x: x < 0, lambda x: np.full_like(x, -0.5)),
    "leaky_relu_big_alpha": (lambda x: x != 0, lambda x: np.where(x > 0, 2.0, 1.0)),
}


def _fluid_rounds_to_even(x):
    """Where fluid 1.8.5's round gives a half to even: its vectorized body, 8 float32 at a
    time; the scalar tail rounds away from zero, as spmd does everywhere."""
    body = np.arange(x.size) < x.size - x.size % 8
    return body & (np.abs(x - np.trunc(x)) == 0.5)


def test_fluid_round_depends_on_position():
    """The stored run shows both of fluid's rules; spmd's is the tail's, everywhere."""
    x = case_input("round")[0]
    want, got = ORACLE["round"][0][0], run_case(fluid, "round")[0][0]
    away = np.copysign(np.floor(np.abs(x) + 0.5), x)
    even = _fluid_rounds_to_even(x)
    halves = np.abs(x - np.trunc(x)) == 0.5
    assert even.any() and (halves & ~even).any()
    np.testing.assert_array_equal(want[even], np.rint(x[even]))
    np.testing.assert_array_equal(want[~even], away[~even])
    np.testing.assert_array_equal(got, away)


@pytest.mark.parametrize("name", sorted(CASES))
def test_activation_matches_fluid(name):
    (out, grad), (want_out, want_grad) = run_case(fluid, name), ORACLE[name]
    x = case_input(name)[0]
    assert out.dtype == want_out.dtype and out.shape == want_out.shape
    same = ~_fluid_rounds_to_even(x) if name == "round" else np.ones(x.shape, bool)
    np.testing.assert_allclose(out[0][same], want_out[0][same], rtol=1e-5, atol=1e-6,
                               err_msg=f"{name} forward")
    differs = np.zeros(x.shape, bool)
    if name in DELIBERATE:
        where, deriv = DELIBERATE[name]
        differs = where(x.astype(np.float64))
        assert differs.any(), f"{name}: the documented difference no longer shows"
        assert not np.allclose(want_grad[0][differs], grad[0][differs]), name
        np.testing.assert_allclose(grad[0][differs], deriv(x[differs].astype(np.float64)),
                                   rtol=1e-5, atol=1e-6, err_msg=f"{name}: true derivative")
    np.testing.assert_allclose(grad[0][~differs], want_grad[0][~differs], rtol=1e-5,
                               atol=1e-6, err_msg=f"{name} gradient where fluid's is right")


@pytest.mark.parametrize("name", sorted(DELIBERATE))
def test_deliberate_gradients_are_the_forward_slope(name):
    """Central differences of spmd's own forward (float64) agree with its gradient away
    from the kinks, which is the reason for each DELIBERATE difference."""
    layer, kwargs, _, _ = CASES[name]
    x0 = case_input(name)[0].astype(np.float64)
    x0 = x0[np.abs(x0) > 0.05] + 0.013  # off the kinks, which sit on the grid
    eps = 1e-6

    def forward(v):
        prog = fluid.Program()
        with fluid.program_guard(prog, fluid.Program()):
            x = fluid.data("x", [1, v.size], "float64")
            out = getattr(fluid.layers, layer)(x, **kwargs)
        return fluid.Executor(fluid.CPUPlace()).run(prog, feed={"x": v[None]},
                                                    fetch_list=[out])[0][0]

    numeric = (forward(x0 + eps) - forward(x0 - eps)) / (2 * eps)
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        x = fluid.data("x", [1, x0.size], "float64")
        x.stop_gradient = False
        out = getattr(fluid.layers, layer)(x, **kwargs)
        grad = fluid.gradients([fluid.layers.reduce_sum(out)], [x])[0]
    analytic = fluid.Executor(fluid.CPUPlace()).run(prog, feed={"x": x0[None]},
                                                    fetch_list=[grad])[0][0]
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7, err_msg=name)
