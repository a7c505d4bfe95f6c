"""DynamicRNN and the LoD tensor-array ops against real fluid 1.8.5
(tests/oracle/make_dynamic_rnn.py -> data/dynamic_rnn.json): values and LoD of every fetch,
fluid.gradients for the inputs and parameters, and two models trained four SGD steps from the
same parameters (a sentiment classifier: embedding -> DynamicRNN with an fc step and a memory
-> last step -> fc softmax; the book's machine-translation decoder with a reordered initial
memory and the encoder's sequences as a static input; test_dyn_rnn's nested DynamicRNN over
paragraphs of sentences): losses and parameters after. static_steps is
test_dynrnn_static_input's forward: each step's static input, written to an array in the
loop, read back after it with its LoD.

fluid 1.8.5 hands a gradient the LoD of its variable; spmd's gradients carry none (the ops
read their forward input's LoD instead), so a gradient's stored LoD is not compared."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_dynamic_rnn import CASES, TRAIN_CASES, run_case, run_training
from oracle_io import load

import spmd.fluid as fluid

FLUID18 = load("dynamic_rnn")
# the fetches that are gradients (fluid.gradients, last in each case)
GRADIENTS = {"array_ops": 3, "nested_lod": 0, "dyn_rnn": 5, "dyn_rnn_static": 2,
             "static_steps": 0}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_fluid(name):
    got, want = run_case(fluid, name), FLUID18[name]
    assert len(got) == len(want)
    first_grad = len(want) - GRADIENTS[name]
    for k, ((g, g_lod), (w, w_lod)) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert g.shape == w.shape, f"{name} fetch {k}: shape {g.shape} vs fluid's {w.shape}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=f"{name} fetch {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{name} fetch {k}")
        if k < first_grad:
            assert g_lod == w_lod, f"{name} fetch {k}: LoD {g_lod} vs fluid's {w_lod}"


def test_cases_cover_the_lod_that_matters():
    """The stored cases exercise what they claim: ties in the rank table, a LoD the array
    elements keep (two levels), and rows shrinking over the steps."""
    ops = FLUID18["array_ops"]
    assert ops[0][0].tolist() == [4]  # max_sequence_len
    assert [s[0].shape[0] for s in ops[1:5]] == [4, 3, 2, 2]  # running sequences per step
    nested = FLUID18["nested_lod"]
    assert nested[1][1] == [[0, 2, 3], [0, 1, 4, 6]]


@pytest.mark.parametrize("name", sorted(TRAIN_CASES))
def test_training_matches_fluid(name):
    got, want = run_training(fluid, name), FLUID18[name]
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=2e-6, atol=1e-6)
    assert got["losses"][-1] < got["losses"][0]
    assert sorted(got["params"]) == sorted(want["params"])
    for p, value in got["params"].items():
        np.testing.assert_allclose(value, want["params"][p], rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name}: parameter {p} after training")
