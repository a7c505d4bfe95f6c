"""fluid.io as fluid 1.8.5's (tests/oracle/make_loader_feed.py): saving to memory
(dirname=None returns the bytes; load_vars / load_inference_model take them), the warnings
save_inference_model gives (no variable to save, an auc op's states, program_only, a
CompiledProgram), and executor.as_numpy."""
from __future__ import annotations

import os
import tempfile
import warnings

import numpy as np
import pytest

import spmd.fluid as fluid
from tests.oracle_io import load

ORACLE = load("loader_feed")["io"]


def _fc_net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[2], dtype="float32")
        y = fluid.layers.fc(x, 1, param_attr=fluid.initializer.Constant(0.5),
                            bias_attr=fluid.initializer.Constant(0.25))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return main, exe, y


def test_an_inference_model_saved_to_memory_loads_from_memory(tmp_path):
    main, exe, y = _fc_net()
    params = fluid.io.save_persistables(exe, None, main)
    assert type(params).__name__ == ORACLE["save_to_memory_type"]
    assert not os.listdir(tmp_path)
    fluid.io.save_inference_model(str(tmp_path), ["x"], [y], exe, main, "model", "params")
    model = (tmp_path / "model").read_bytes()
    with fluid.scope_guard(fluid.Scope()):  # parameters from the bytes, not the old scope
        program, feeds, fetches = fluid.io.load_inference_model(None, exe, model, params)
        got, = exe.run(program, feed={feeds[0]: ORACLE["from_memory"]["x"]},
                       fetch_list=fetches)
    np.testing.assert_allclose(got, ORACLE["from_memory"]["y"], rtol=1e-6)
    assert ORACLE["no_params"] == "ValueError"
    with pytest.raises(ValueError, match="params_filename must be the parameters' bytes"):
        fluid.io.load_inference_model(None, exe, model, None)


def test_load_vars_from_memory_checks_the_bytes():
    main, exe, _ = _fc_net()
    params = fluid.io.save_params(exe, None, main)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.io.load_params(exe, None, main, params)
        w = next(v.name for v in main.global_block().all_parameters()
                 if list(v.shape) == [2, 1])
        np.testing.assert_array_equal(np.array(scope.find_var(w).get_tensor()),
                                      np.full((2, 1), 0.5, "float32"))
        with pytest.raises(Exception, match="not an .npz archive"):
            fluid.io.load_params(exe, None, main, b"not an archive")


def _warnings_of(build, **kwargs):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        target = build()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fluid.io.save_inference_model(d, ["x"], [target], exe, main, **kwargs)
    return [str(i.message) for i in w]


def _no_var():
    x = fluid.layers.data(name="x", shape=[-1, 1], dtype="float32", append_batch_size=False)
    return x + 1


def _with_auc():
    x = fluid.layers.data(name="x", shape=[2], dtype="float32")
    y = fluid.layers.data(name="y", shape=[1], dtype="int64")
    predict = fluid.layers.fc(x, 2, act="softmax")
    fluid.layers.auc(input=predict, label=y)
    return predict


def _fc():
    return fluid.layers.fc(fluid.layers.data(name="x", shape=[2], dtype="float32"), 1)


@pytest.mark.parametrize("case,build,kwargs", [("no_var", _no_var, {}), ("auc", _with_auc, {}),
                                               ("program_only", _fc, {"program_only": True})])
def test_save_inference_model_warns_as_fluid(case, build, kwargs):
    assert _warnings_of(build, **kwargs)[:1] == ORACLE["warnings"][case]


def test_saving_nothing_writes_nothing_and_a_compiled_program_is_warned_of(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        fluid.layers.data(name="x", shape=[1], dtype="float32")
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.warns(UserWarning, match="no variable in your model"):
        assert fluid.io.save_persistables(exe, str(tmp_path / "none"), main) is None
    assert not (tmp_path / "none").exists()
    main, exe, y = _fc_net()
    with pytest.warns(UserWarning, match="The input is a CompiledProgram"):
        fluid.io.save_persistables(exe, str(tmp_path / "ckpt"), fluid.CompiledProgram(main))
    assert os.listdir(tmp_path / "ckpt")


def test_as_numpy_is_fluids():
    t = fluid.LoDTensor()
    t.set(np.ones((2, 2), "float32"), fluid.CPUPlace())
    np.testing.assert_array_equal(fluid.executor.as_numpy(t), np.ones((2, 2)))
    assert [a.shape for a in fluid.executor.as_numpy([t, t])] == [(2, 2), (2, 2)]
    assert fluid.executor.as_numpy(fluid.LoDTensor()) is None  # not initialized
    t.set_recursive_sequence_lengths([[1, 1]])
    with pytest.raises(RuntimeError, match="hold LoD information"):
        fluid.executor.as_numpy(t)
