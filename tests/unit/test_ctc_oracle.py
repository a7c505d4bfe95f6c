"""warpctc, ctc_greedy_decoder and edit_distance against stored fluid 1.8.5
(tests/oracle/make_sequence_rnn.py): with fixed inputs and parameters, the CTC losses and their
gradients for the input and the logits' fc weight (LoD and time-major padded forms,
norm_by_times, a blank other than 0, a label too long for its logits), the greedy decoding with
its LoD and its edit distance to the label; edit_distance alone (normalized, ignored_tokens,
padded); and a small CTC recognizer (fc, dynamic_gru, warpctc) whose losses and decoding
distances over SGD steps match fluid's."""
from __future__ import annotations

import numpy as np
import pytest
from fluid_compare import assert_array_like_fluid, assert_outputs_like_fluid
from oracle.make_sequence_rnn import CTC_CASES, EDIT_CASES, run_ctc, run_edit, train_ctc
from oracle_io import load

import spmd.fluid as fluid
from spmd.core import unique_name

FLUID18 = load("sequence_rnn")


def _fresh(fn, *args):
    with unique_name.guard():
        return fn(fluid, *args)


@pytest.mark.parametrize("name", sorted(CTC_CASES))
def test_ctc_layers_match_fluid18(name):
    got, want = _fresh(run_ctc, name), FLUID18["ctc/" + name]
    assert got["params"] == want["params"]
    assert got["out_lods"] == want["out_lods"]
    assert_outputs_like_fluid("ctc/" + name, got, want, tol=5e-5)


@pytest.mark.parametrize("name", sorted(EDIT_CASES))
def test_edit_distance_matches_fluid18(name):
    got, want = _fresh(run_edit, name), FLUID18["edit/" + name]
    for i, (g, w) in enumerate(zip(got["outs"], want["outs"])):
        assert_array_like_fluid(g, w, f"edit/{name} outs[{i}]", tol=1e-6)


def test_ctc_recognizer_sgd_matches_fluid18():
    got, want = _fresh(train_ctc), FLUID18["train/ctc"]
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=2e-5, atol=2e-5)
    assert got["distances"] == want["distances"]
    assert got["losses"][-1] < got["losses"][0]
