"""dynamic_lstm, dynamic_lstmp and dynamic_gru against stored fluid 1.8.5
(tests/oracle/make_sequence_rnn.py): with fixed inputs and parameters, the layer outputs and
their LoD, the gradients of a fixed loss for the input, the initial states and every parameter,
parameter names and shapes; and the losses of a few SGD steps of an LSTM + GRU text classifier.
"""
from __future__ import annotations

import numpy as np
import pytest
from fluid_compare import assert_outputs_like_fluid
from oracle.make_sequence_rnn import RNN_CASES, run_rnn, train_classifier
from oracle_io import load

import spmd.fluid as fluid
from spmd.core import unique_name

FLUID18 = load("sequence_rnn")


def _fresh(fn, *args):
    with unique_name.guard():
        return fn(fluid, *args)


@pytest.mark.parametrize("name", sorted(RNN_CASES))
def test_recurrent_layer_matches_fluid18(name):
    got, want = _fresh(run_rnn, name), FLUID18["rnn/" + name]
    assert got["params"] == want["params"]
    assert got["out_lods"] == want["out_lods"]
    assert_outputs_like_fluid("rnn/" + name, got, want, tol=2e-5)


def test_lstm_gru_classifier_sgd_matches_fluid18():
    got, want = _fresh(train_classifier), FLUID18["train/classifier"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert got[-1] < got[0]
