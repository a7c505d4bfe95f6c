"""fluid.contrib.decoder (InitState, StateCell, TrainingDecoder, BeamSearchDecoder) on a tiny
seq2seq model against fluid 1.8.5's stored numbers (tests/oracle/make_contrib_decoder.py):
the losses and final parameters of a few SGD steps of teacher-forced training, and the ids,
scores and LoD of beam search decoding; and the API's own checks."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_contrib_decoder import DECODE_CASES, decode, train
from oracle_io import load

import spmd.fluid as fluid
from spmd.core import unique_name
from spmd.fluid.contrib.decoder import beam_search_decoder as decoder

FLUID18 = load("contrib_decoder")


def test_training_decoder_trains_as_fluid18():
    with unique_name.guard():
        got = train(fluid, decoder)
    want = FLUID18["train"]
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-5, atol=1e-6)
    assert len(got["final"]) == len(want["final"])
    for g, w in zip(got["final"], want["final"]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(DECODE_CASES))
def test_beam_search_decoder_decodes_as_fluid18(name):
    with unique_name.guard():
        got = decode(fluid, decoder, **DECODE_CASES[name])
    want = FLUID18["decode/" + name]
    assert got["ids_lod"] == want["ids_lod"]
    assert got["scores_lod"] == want["scores_lod"]
    np.testing.assert_array_equal(got["ids"], want["ids"])
    np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-5, atol=1e-5)


def test_state_cell_checks():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        context = fluid.data("context", [None, 3], "float32")
        with pytest.raises(ValueError, match="must be an InitState"):
            decoder.StateCell(inputs={"x": None}, states={"h": context}, out_state="h")
        with pytest.raises(ValueError, match="out_state must be one state"):
            decoder.StateCell(inputs={"x": None}, states={"h": decoder.InitState(context)},
                              out_state="c")
        with pytest.raises(ValueError, match="init_boot must be provided"):
            decoder.InitState(shape=[3])
        boot = decoder.InitState(init_boot=context, shape=[-1, 4], value=0.5)
        assert tuple(boot.value.shape) == (-1, 4)
        cell = decoder.StateCell(inputs={"x": None}, states={"h": boot}, out_state="h")
        with pytest.raises(ValueError, match="Invalid input x"):
            cell.get_input("x")


def test_decoders_refuse_use_outside_their_block():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        context = fluid.data("context", [None, 3], "float32")
        cell = decoder.StateCell(inputs={"x": None}, states={"h": decoder.InitState(context)},
                                 out_state="h")
        dec = decoder.TrainingDecoder(cell)
        with pytest.raises(ValueError, match="inside block of TrainingDecoder"):
            dec.step_input(context)
        with pytest.raises(ValueError, match="only be visited outside the block"):
            dec()
        with pytest.raises(ValueError, match="already entered a decoder"):
            decoder.TrainingDecoder(cell)
