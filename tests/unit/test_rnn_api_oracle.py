"""fluid 1.8's RNN API against stored real fluid 1.8.5 (tests/oracle/make_rnn_api.py): rnn over
GRUCell / LSTMCell (outputs, final states, gradients, parameter names), birnn against fluid's
two rnn calls, a small book-style seq2seq model (bidirectional GRU / LSTM encoder, attention
decoder) trained a few SGD steps from the same parameters, and its beam-search inference with
BeamSearchDecoder + dynamic_decode (token ids, final log probabilities and lengths);
BasicDecoder with GreedyEmbeddingHelper (ids, logits, lengths) and with TrainingHelper trained
a few SGD steps through the decoding loop; the
beam_search op on LoD tensors (ended prefixes, a pruned source, probabilities, ids None) and
the book's older While loop of beam_search steps decoded by beam_search_decode."""
from __future__ import annotations

import numpy as np
import pytest
from fluid_compare import assert_array_like_fluid, assert_outputs_like_fluid
from oracle.make_rnn_api import (
    RNN_CASES,
    beam_search_cases,
    run_beam,
    run_beam_search_loop,
    run_beam_search_op,
    run_bidirectional,
    run_greedy,
    run_rnn,
    run_teacher_forcing,
    run_train,
)
from oracle_io import load

import spmd.fluid as fluid
from spmd.core import unique_name

FLUID18 = load("rnn_api")


def _fresh(fn, *args):
    with unique_name.guard():
        return fn(fluid, *args)


@pytest.mark.parametrize("name", sorted(RNN_CASES))
def test_rnn_matches_fluid18(name):
    got, want = _fresh(run_rnn, name), FLUID18["rnn/" + name]
    assert got["params"] == want["params"]
    assert_outputs_like_fluid("rnn/" + name, got, want, tol=2e-5)


def test_birnn_matches_two_fluid18_rnns():
    got, want = _fresh(run_bidirectional, True), FLUID18["bidirectional"]
    assert got["params"] == want["params"]
    for i, (g, w) in enumerate(zip(got["outs"], want["outs"])):
        assert_array_like_fluid(g, w, f"birnn out {i}", tol=2e-5)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_seq2seq_sgd_steps_match_fluid18(kind):
    got, want = _fresh(run_train, kind), FLUID18["train/" + kind]
    assert got["params"] == want["params"]
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=2e-5)
    for (name, _), g, w in zip(want["params"], got["final"], want["final"]):
        assert_array_like_fluid(g, w, f"train/{kind} {name}", tol=5e-5)


@pytest.mark.parametrize("is_test", [False, True], ids=["arrays", "is_test"])
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_beam_search_decoding_matches_fluid18(kind, is_test):
    got, want = _fresh(run_beam, kind, is_test), FLUID18[f"beam/{kind}/{is_test}"]
    assert got["params"] == want["params"]
    ids, log_probs, lengths, decoded = got["outs"]
    w_ids, w_log_probs, w_lengths, w_decoded = want["outs"]
    np.testing.assert_array_equal(ids, w_ids)  # [batch, time, beam] after gather_tree
    assert_array_like_fluid(log_probs, w_log_probs, "final log_probs", tol=2e-5)
    np.testing.assert_array_equal(lengths, w_lengths)
    np.testing.assert_array_equal(decoded, w_decoded)


@pytest.mark.parametrize("name", sorted(beam_search_cases()))
def test_beam_search_op_matches_fluid18(name):
    got, want = _fresh(run_beam_search_op, name), FLUID18["beam_search_op/" + name]
    ids, scores, parent = got["outs"]
    w_ids, w_scores, w_parent = want["outs"]
    np.testing.assert_array_equal(ids, w_ids)
    assert_array_like_fluid(scores, w_scores, f"{name} selected_scores", tol=1e-6)
    np.testing.assert_array_equal(parent, w_parent)
    assert parent.dtype == w_parent.dtype == np.int32
    assert got["lod"] == want["lod"]


def test_beam_search_loop_and_decode_match_fluid18():
    got, want = _fresh(run_beam_search_loop), FLUID18["beam_search_loop"]
    np.testing.assert_array_equal(got["outs"][0], want["outs"][0])
    assert_array_like_fluid(got["outs"][1], want["outs"][1], "sentence scores", tol=2e-6)
    assert got["lod"] == want["lod"]


def test_greedy_basic_decoder_matches_fluid18():
    got, want = _fresh(run_greedy), FLUID18["greedy"]
    assert got["params"] == want["params"]
    ids, logits, state, lengths = got["outs"]
    w_ids, w_logits, w_state, w_lengths = want["outs"]
    np.testing.assert_array_equal(ids, w_ids)
    assert_array_like_fluid(logits, w_logits, "greedy logits", tol=2e-5)
    assert_array_like_fluid(state, w_state, "greedy final state", tol=2e-5)
    np.testing.assert_array_equal(lengths, w_lengths)


def test_teacher_forcing_sgd_steps_match_fluid18():
    got, want = _fresh(run_teacher_forcing), FLUID18["teacher_forcing"]
    assert got["params"] == want["params"]
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=2e-5)
    for (name, _), g, w in zip(want["params"], got["final"], want["final"]):
        assert_array_like_fluid(g, w, f"teacher forcing {name}", tol=5e-5)
