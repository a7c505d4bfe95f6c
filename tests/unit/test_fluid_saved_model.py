"""A model PaddlePaddle 1.8.5 saved (tests/oracle/make_inference_feed_fetch.py keeps its
protobuf __model__ and tensor files in tests/oracle/data/fluid18_inference_model*) loads with
fluid.io.load_inference_model and runs, with its feed and fetch ops, to fluid's outputs."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from oracle.make_inference_feed_fetch import XV, ZV
from oracle_io import DATA_DIR, load

import spmd.fluid as fluid
from spmd.io.fluid_model import read_lod_tensor

CASES = load("inference_feed_fetch")
SEPARATE = os.path.join(DATA_DIR, "fluid18_inference_model")
COMBINED = os.path.join(DATA_DIR, "fluid18_inference_model_combined")


def _copy(src, tmp_path):
    dst = tmp_path / os.path.basename(src)
    shutil.copytree(src, dst)
    return str(dst)


def _check_runs(exe, program, feeds, fetches):
    assert feeds == CASES["feed_names"]
    assert [op.type for op in program.global_block().ops] == CASES["ops"]
    out, avg = exe.run(program, feed={"x": XV, "z": ZV}, fetch_list=fetches)
    np.testing.assert_allclose(out, CASES["out"], rtol=1e-6)
    np.testing.assert_allclose(avg, CASES["avg"], rtol=1e-6)


def test_a_model_fluid_saved_loads_and_runs(tmp_path):
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        program, feeds, fetches = fluid.io.load_inference_model(_copy(SEPARATE, tmp_path), exe)
        assert [v.name for v in fetches] == CASES["fetch_names"]
        assert program.global_block().var("feed").type == "FEED_MINIBATCH"
        _check_runs(exe, program, feeds, fetches)
        w = np.array(fluid.global_scope().find_var("w").get_tensor())
    np.testing.assert_array_equal(w, [[0.5, -1.0], [0.25, 0.75], [-0.5, 1.5]])


def test_a_model_fluid_saved_in_one_params_file_loads_from_files_and_bytes(tmp_path):
    exe = fluid.Executor(fluid.CPUPlace())
    path = _copy(COMBINED, tmp_path)
    with fluid.scope_guard(fluid.Scope()):
        loaded = fluid.io.load_inference_model(path, exe, model_filename="model",
                                               params_filename="params")
        _check_runs(exe, *loaded)
    with open(os.path.join(path, "model"), "rb") as f, \
            open(os.path.join(path, "params"), "rb") as g:
        model, params = f.read(), g.read()
    with fluid.scope_guard(fluid.Scope()):
        _check_runs(exe, *fluid.io.load_inference_model(None, exe, model, params))


def test_fluid_tensor_files_are_read_exactly_and_damage_is_named(tmp_path):
    with open(os.path.join(SEPARATE, "b"), "rb") as f:
        buf = f.read()
    array, lod, end = read_lod_tensor(buf)
    assert array.dtype == np.float32 and lod == [] and end == len(buf)
    np.testing.assert_array_equal(array, np.array([0.1, -0.2], "float32"))
    path = _copy(SEPARATE, tmp_path)
    with open(os.path.join(path, "w"), "r+b") as f:
        f.truncate(30)
    with fluid.scope_guard(fluid.Scope()), pytest.raises(ValueError, match="w: the tensor"):
        fluid.io.load_inference_model(path, fluid.Executor(fluid.CPUPlace()))
