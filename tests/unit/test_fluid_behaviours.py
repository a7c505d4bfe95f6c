"""Behaviours that must be fluid 1.8.5's (issue 22): the programs of tests/behaviour_cases.py
run in spmd give what tests/oracle/make_behaviours.py stored from real fluid."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import behaviour_cases as cases  # noqa: E402
from oracle_io import load  # noqa: E402

ORACLE = load("behaviours")


def _jsonish(value):
    """Lists for tuples, so a stored JSON value and a fresh one compare equal."""
    if isinstance(value, dict):
        return {k: _jsonish(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonish(v) for v in value]
    return value


def test_data_feeder_shapes_for_every_shape_and_lod_level():
    got = cases.feeder_shapes(fluid)
    want = ORACLE["feeder_shapes"]
    assert _jsonish(got["var_shapes"]) == want["var_shapes"]
    assert got["fed"] == want["fed"]
    # the case: fluid.data(shape=[None], lod_level=1) keeps [N], no trailing 1
    assert want["fed"]["seq_none"]["shape"] == [3]


@pytest.mark.parametrize("name", cases.LOD_CASE_NAMES)
def test_lod_is_shared_as_fluid_shares_it(name):
    assert _jsonish(cases.lod_sharing(fluid, name)) == ORACLE["lod_sharing"][name]


def test_fill_constant_batch_size_like_counts_sequences_of_a_lod_input():
    # fluid's kernel takes a LoD input's batch as its number of sequences (2), not rows (5)
    got = _jsonish(cases.lod_sharing(fluid, "fill_constant_batch_size_like"))
    assert got["fetched"]["shape"] == [2, 3]
    assert ORACLE["lod_sharing"]["fill_constant_batch_size_like"]["fetched"]["shape"] == [2, 3]


def test_sequence_conv_after_squeeze_of_a_lod_embedding():
    got = cases.sequence_conv_after_squeeze(fluid)
    want = ORACLE["sequence_conv_after_squeeze"]
    assert got["levels"] == want["levels"] == [1, 1, 1]
    np.testing.assert_allclose(got["pooled"], want["pooled"], rtol=1e-6, atol=1e-6)


def test_cross_entropy_takes_hard_labels_without_the_class_dim():
    got = cases.cross_entropy_rank_minus_one(fluid)
    want = ORACLE["cross_entropy_rank_minus_one"]
    np.testing.assert_array_equal(got["x"], want["x"])
    assert got["build_shapes"] == want["build_shapes"] == [[-1, -1], [-1, -1, 1]]
    assert got["ce"].shape == want["ce"].shape == (2, 3)
    np.testing.assert_allclose(got["ce"], want["ce"], rtol=1e-6)
    np.testing.assert_allclose(got["ce3"], want["ce3"], rtol=1e-6)
    np.testing.assert_allclose(got["grad"], want["grad"], rtol=1e-5, atol=1e-7)


def test_cross_entropy_refuses_a_label_whose_known_dims_differ():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        p = fluid.data(name="p", shape=[-1, 3, 5], dtype="float32")
        y = fluid.data(name="y", shape=[-1, 4], dtype="int64")
        with pytest.raises(InvalidArgumentError, match="without the class dim"):
            fluid.layers.cross_entropy(p, y)


def test_numpy_lods_are_taken_as_fluid_takes_them():
    got = cases.numpy_lods(fluid)
    want = ORACLE["numpy_lods"]
    for name in ("array_2d", "list_of_arrays", "int32", "two_levels"):
        assert got[name]["lengths"] == want[name]["lengths"]
        assert got[name]["lod"] == want[name]["lod"]
        np.testing.assert_array_equal(got[name]["data"], want[name]["data"])
    assert got["set_lengths"] == want["set_lengths"]
    assert got["set_lod"] == want["set_lod"]


def test_a_float_numpy_lod_is_refused_as_in_fluid():
    with pytest.raises(InvalidArgumentError, match="integer"):
        fluid.create_lod_tensor(np.zeros((5, 1), "float32"), np.array([[2.0, 3.0]]),
                                fluid.CPUPlace())


def test_iterable_loaders_yield_lod_tensors_as_fluid():
    got = cases.loader_yields(fluid)
    want = ORACLE["loader_yields"]
    assert _jsonish(got) == want
    assert want["DataLoader_return_list0"]["fields"][1][:2] == ["x", "LoDTensor"]


def test_pserver_programs_of_word2vec_are_fluids():
    # the shared is_sparse table is prefetched (distributed_lookup_table), its summed gradient
    # split as SelectedRows, and it is neither received nor initialized on the trainer;
    # ParamAttr(learning_rate=0.5)'s rate is scaled on the pserver that updates fc_0.w_0
    got = _jsonish(cases.pserver_programs(fluid))
    want = ORACLE["pserver_programs"]
    assert got == want
    assert ["fake_init", ["shared_w"]] in want["trainer_startup"]
    assert any(op[0] == "distributed_lookup_table" for op in want["trainer"])


def test_inference_model_fetches_through_fluids_scale_ops(tmp_path):
    got = cases.inference_model(fluid, str(tmp_path))
    want = ORACLE["inference_model"]
    for kind in ("variables", "one"):
        for key in ("saved", "feeds", "fetches", "compute_ops"):
            assert got[kind][key] == want[kind][key], (kind, key)
        for g, w in zip(got[kind]["outputs"], want[kind]["outputs"]):
            np.testing.assert_allclose(g, w, rtol=1e-6)
    assert want["variables"]["fetches"] == ["save_infer_model/scale_0.tmp_0",
                                            "save_infer_model/scale_1.tmp_0"]
