"""gru_unit, lstm_unit and fluid.layers.lstm against stored real Paddle
(tests/oracle/make_rnn_units.py): forward outputs and the gradients of a fixed loss for the
inputs and every parameter, parameter names and shapes, and a few SGD steps of a small model.
gru_unit / lstm_unit come from fluid 1.8.5; cudnn_lstm, GPU-only in 1.8.5 (and in 3.3.1), from
PaddlePaddle 3.3.1's CPU `rnn` op (mode LSTM) fed fluid's flat weight cut by cuDNN's layout."""
from __future__ import annotations

import numpy as np
import pytest
from fluid_compare import assert_array_like_fluid, assert_outputs_like_fluid
from oracle.make_rnn_units import (
    GRU_CASES,
    LSTM_CASES,
    LSTM_TRAIN_CASE,
    LSTM_UNIT_CASES,
    TRAIN_CASES,
    run_gru,
    run_lstm,
    run_lstm_unit,
    run_train,
    train_lstm,
)
from oracle_io import load

import spmd.fluid as fluid
from spmd.core import unique_name

FLUID18, PADDLE33 = load("rnn_units"), load("rnn_units_paddle")


def _fresh(fn, *args, **kwargs):
    with unique_name.guard():
        return fn(fluid, *args, **kwargs)


@pytest.mark.parametrize("name", sorted(GRU_CASES))
def test_gru_unit_matches_fluid18(name):
    with pytest.warns(UserWarning, match="ignored") if GRU_CASES[name][4] != "tanh" else \
            _no_warning():
        got = _fresh(run_gru, name)
    want = FLUID18["gru/" + name]
    assert got["params"] == want["params"] and got["shapes"] == want["shapes"]
    assert_outputs_like_fluid("gru/" + name, got, want, tol=1e-5)


@pytest.mark.parametrize("name", sorted(LSTM_UNIT_CASES))
def test_lstm_unit_matches_fluid18(name):
    got, want = _fresh(run_lstm_unit, name), FLUID18["lstm_unit/" + name]
    assert got["params"] == want["params"] and got["shapes"] == want["shapes"]
    assert_outputs_like_fluid("lstm_unit/" + name, got, want, tol=1e-5)


@pytest.mark.parametrize("name", TRAIN_CASES)
def test_sgd_steps_match_fluid18(name):
    got, want = _fresh(run_train, name), FLUID18["train/" + name]
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-5, atol=1e-6)
    assert got["params"] == want["params"]
    for p, g, w in zip(want["params"], got["final"], want["final"]):
        assert_array_like_fluid(g, w, f"train/{name} {p}", tol=1e-5)


@pytest.mark.parametrize("name", sorted(LSTM_CASES))
def test_lstm_layer_builds_what_fluid18_builds(name):
    with unique_name.guard():
        got = run_lstm(fluid, name, with_meta=True)
    want = FLUID18["lstm_layer/" + name]
    assert got["params"] == want["params"]  # the flat weight: same name, same length
    bidirec = LSTM_CASES[name][5]
    for i, (g, w) in enumerate(zip(got["shapes"], want["shapes"])):
        if i == 0 and bidirec:  # fluid declares hidden_size; the value has 2 * hidden_size
            assert g == w[:2] + [2 * w[2]]
        else:
            assert g == w


@pytest.mark.parametrize("name", sorted(LSTM_CASES))
def test_cudnn_lstm_matches_paddle33(name):
    got, want = _fresh(run_lstm, name), PADDLE33["lstm/" + name]
    # grads: c0, h0, x (sorted feed names), then the flat W
    assert_outputs_like_fluid("lstm/" + name, got, want, tol=2e-5)


def test_cudnn_lstm_sgd_steps_match_paddle33():
    want = PADDLE33["train_lstm"]
    got = _fresh(train_lstm, LSTM_TRAIN_CASE, want["y"], want["out_w"])
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-5, atol=1e-6)
    assert got["losses"][-1] < got["losses"][0]
    assert_array_like_fluid(got["final_w"], want["final_w"], "train_lstm W", tol=1e-5)


class _no_warning:
    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        return self._catch.__exit__(*exc)
