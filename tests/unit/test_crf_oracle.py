"""linear_chain_crf, crf_decoding and chunk_eval against stored fluid 1.8.5
(tests/oracle/make_sequence_rnn.py): with fixed inputs and parameters, the negative
log-likelihoods, Viterbi paths (with and without label), chunk counts and rates, the gradients of
a fixed loss for the input and every parameter, in the LoD and padded forms; chunk_eval alone
under every scheme; and a simplified label_semantic_roles tagger (embeddings, two LSTMs, CRF)
whose losses and chunk counts over SGD steps match fluid's."""
from __future__ import annotations

import numpy as np
import pytest
from fluid_compare import assert_array_like_fluid, assert_outputs_like_fluid
from oracle.make_sequence_rnn import CHUNK_CASES, CRF_CASES, run_chunk, run_crf, train_tagger
from oracle_io import load

import spmd.fluid as fluid
from spmd.core import unique_name

FLUID18 = load("sequence_rnn")


def _fresh(fn, *args):
    with unique_name.guard():
        return fn(fluid, *args)


@pytest.mark.parametrize("name", sorted(CRF_CASES))
def test_crf_layers_match_fluid18(name):
    got, want = _fresh(run_crf, name), FLUID18["crf/" + name]
    assert got["params"] == want["params"]
    assert got["out_lods"] == want["out_lods"]
    assert_outputs_like_fluid("crf/" + name, got, want, tol=2e-5)


@pytest.mark.parametrize("name", sorted(CHUNK_CASES))
def test_chunk_eval_matches_fluid18(name):
    got, want = _fresh(run_chunk, name), FLUID18["chunk/" + name]
    for i, (g, w) in enumerate(zip(got["outs"], want["outs"])):
        assert_array_like_fluid(g, w, f"chunk/{name} outs[{i}]", tol=1e-6)
    assert int(want["outs"][4][0]) > 0  # label chunks were found


def test_srl_tagger_sgd_matches_fluid18():
    got, want = _fresh(train_tagger), FLUID18["train/tagger"]
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=2e-5, atol=2e-5)
    assert got["chunks"] == want["chunks"]
    assert got["losses"][-1] < got["losses"][0]
