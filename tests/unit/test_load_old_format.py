"""fluid.load of what save_params / save_persistables wrote (no .pdparams), as fluid 1.8:
a directory or a single file (filename=, then var_list says which variables it holds); an
executor and, for a file, var_list are required (ValueError); a file that does not hold the
variables as the program declares them (var.desc.set_shape changed one) is a RuntimeError."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid


def _model():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[2, 3], dtype="float32")
        fluid.layers.fc(x, 4)
    return main, startup


def _values(main, scope):
    return {v.name: np.array(scope.find_var(v.name).get_tensor())
            for v in fluid.io.get_program_persistable_vars(main)}


@pytest.mark.parametrize("filename", [None, "model_single"])
def test_load_reads_back_what_save_persistables_wrote(tmp_path, filename):
    main, startup = _model()
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        saved = _values(main, scope)
        fluid.io.save_persistables(exe, str(tmp_path), main, filename=filename)
        for name, value in saved.items():
            scope.find_var(name).get_tensor().set(np.zeros_like(value), fluid.CPUPlace())
        path = str(tmp_path) if filename is None else str(tmp_path / filename)
        var_list = fluid.io.get_program_persistable_vars(main)
        fluid.load(main, path, exe, var_list if filename else None)
        for name, value in _values(main, scope).items():
            np.testing.assert_array_equal(value, saved[name])
        with pytest.raises(ValueError, match="executor is required"):
            fluid.load(main, path, None, var_list)
        if filename:
            with pytest.raises(ValueError, match="var_list is required"):
                fluid.load(main, path, exe, None)
        weight = main.global_block().var("fc_0.w_0")
        weight.desc.set_shape([13, 14])
        assert list(weight.shape) == [13, 14]
        with pytest.raises(RuntimeError, match="does not hold the variables"):
            fluid.load(main, path, exe, var_list if filename else None)


def test_a_variable_made_directly_belongs_to_its_block_and_a_load_of_it_fails_as_fluids(
        tmp_path):
    from spmd.fluid import framework

    main, startup = _model()
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        fluid.io.save_persistables(exe, str(tmp_path), main, filename="single")
    extra = framework.Variable(main.global_block(), shape=[1], name="test_temp_var")
    assert main.global_block().var("test_temp_var") is extra
    assert "test_temp_var" in [v.name for v in main.list_vars()]
    made = main.global_block().create_var(name="test_temp_var", shape=[1])
    assert made is extra  # create_var finds it, as fluid's
    with fluid.scope_guard(scope), pytest.raises(RuntimeError, match="test_temp_var"):
        fluid.load(main, str(tmp_path / "single"), exe, list(main.list_vars()))
