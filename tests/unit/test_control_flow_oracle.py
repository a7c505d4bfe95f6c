"""Control flow on sub-blocks against real fluid 1.8.5 (tests/oracle/make_control_flow.py):
While with arrays and Print, while_loop, cond (nested, both ways), case, switch_case, Switch,
IfElse, StaticRNN and is_empty, forward values and fluid.gradients; a StaticRNN trained for
four SGD steps gives fluid's losses.

Where fluid 1.8.5 is wrong, the test says so and checks against finite differences instead:
its gradients through while_loop_grad's loop (h = tanh(h W + b), four times) are not those of
the loss (zero for the initial h), so there the gradients, and the While-trained losses after
the first step, are checked against float64 finite differences of a numpy model."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_control_flow import CASES, run_case, run_training
from oracle_io import load

import spmd.fluid as fluid

FLUID18 = load("control_flow")


# (case, fetch index) pairs where fluid 1.8.5's value is wrong: see the module doc
FLUID_WRONG = {("while_loop_grad", 3), ("while_loop_grad", 4), ("while_loop_grad", 5)}


def _loop_model(x, w, b, steps):
    h = x
    for _ in range(steps):
        h = np.tanh(h @ w + b)
    return h


def _fd(fn, a, eps=1e-6):
    g = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        p, m = a.copy(), a.copy()
        p[idx] += eps
        m[idx] -= eps
        g[idx] = (fn(p) - fn(m)) / (2 * eps)
    return g


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_fluid(name, capsys):
    got, want = run_case(fluid, name), FLUID18[name]
    want = [[None if (name, k) in FLUID_WRONG else w for k, w in enumerate(run)]
            for run in want]
    assert len(got) == len(want)
    for run, (g_run, w_run) in enumerate(zip(got, want)):
        assert len(g_run) == len(w_run)
        for k, (g, w) in enumerate(zip(g_run, w_run)):
            if w is None:
                continue
            w = np.asarray(w)
            assert g.shape == w.shape, f"{name} run {run} fetch {k}: {g.shape} vs {w.shape}"
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6,
                                           err_msg=f"{name} run {run} fetch {k}")
            else:
                np.testing.assert_array_equal(g, w, err_msg=f"{name} run {run} fetch {k}")


def test_print_inside_a_loop_prints_every_iteration(capsys):
    run_case(fluid, "while_arrays")
    assert capsys.readouterr().out.count("step") == 3


def test_while_loop_gradients_are_the_losss_where_fluid_is_wrong():
    from oracle.make_control_flow import B3, W33, X23

    x, w, b = (a.astype(np.float64) for a in (X23, W33, B3))

    def loss(x, w, b):
        h = _loop_model(x, w, b, 4)
        return np.mean(h * h)

    expected = [_fd(lambda a: loss(a, w, b), x), _fd(lambda a: loss(x, a, b), w),
                _fd(lambda a: loss(x, w, a), b)]
    got = run_case(fluid, "while_loop_grad")[0][3:]
    stored = FLUID18["while_loop_grad"][0][3:]
    for g, e, f in zip(got, expected, stored):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
        assert not np.allclose(f, e, atol=1e-3)  # fluid 1.8.5's is not the gradient


def test_static_rnn_training_losses_match_fluid():
    losses = run_training(fluid, "train_static_rnn")
    np.testing.assert_allclose(losses, FLUID18["train_static_rnn"], rtol=2e-5, atol=1e-6)
    assert losses[-1] < losses[0]


def test_while_training_follows_sgd_on_the_true_gradient():
    from oracle.make_control_flow import B3, W33, X23

    losses = run_training(fluid, "train_while")
    assert losses[0] == pytest.approx(FLUID18["train_while"][0], rel=1e-5)
    x, t = X23.astype(np.float64), X23[::-1].astype(np.float64) * 0.5
    w, b = W33.astype(np.float64), B3.astype(np.float64)

    def loss(w, b):
        return np.mean((_loop_model(x, w, b, 3) - t) ** 2)

    expected = []
    for _ in range(4):
        expected.append(loss(w, b))
        gw = _fd(lambda a, b=b: loss(a, b), w)
        gb = _fd(lambda a, w=w: loss(w, a), b)
        w, b = w - 0.1 * gw, b - 0.1 * gb
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
