"""Behaviour of fluid 1.8 names spmd.fluid provides beyond fluid.layers: fluid.core's static
names, layers.utils' nested structures, unique_name as a module, fluid.data / fluid.layers.rnn
both function and module, reader.DataLoaderBase, the contrib helpers."""
from __future__ import annotations

import collections
import importlib

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fluid import core


def _program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        y = fluid.layers.fc(x, 2)
        loss = fluid.layers.mean(y)
    return main, startup, x, y, loss


def test_vartype_has_fluids_variable_kinds_and_values():
    vt = core.VarDesc.VarType
    # fluid 1.8.5's codes (read from core.VarDesc.VarType there)
    assert (vt.LOD_TENSOR, vt.SELECTED_ROWS, vt.LOD_TENSOR_ARRAY, vt.FP32, vt.INT64) == (
        7, 8, 13, 5, 3)
    main, _, x, _, _ = _program()
    assert x.dtype == vt.FP32
    from spmd.core.dtypes import convert_dtype

    with pytest.raises(ValueError, match="kind of variable, not a dtype"):
        convert_dtype(vt.LOD_TENSOR)


def test_enforce_not_met_catches_spmds_errors():
    main, startup, x, y, _ = _program()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with pytest.raises(core.EnforceNotMet):
        exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[y])  # wrong width
    assert issubclass(core.EOFException, core.EnforceNotMet)


def test_tensor_is_the_lod_tensor():
    t = fluid.Tensor()
    t.set(np.arange(6, dtype="float32").reshape(3, 2), fluid.CPUPlace())
    t.set_recursive_sequence_lengths([[2, 1]])
    assert isinstance(t, core.Tensor) and isinstance(t, core.LoDTensor)
    assert t.shape() == [3, 2] and t.lod() == [[0, 2, 3]]


def test_core_queries_and_suffixes():
    assert core.kGradVarSuffix() == core.grad_var_suffix() == "@GRAD"
    assert core.kEmptyVarName() == core.empty_var_name() == "@EMPTY@"
    assert core.size_of_dtype(core.VarDesc.VarType.FP32) == 4
    assert core.size_of_dtype("int64") == 8
    assert core.is_compiled_with_dist() and not core.is_compiled_with_brpc()
    assert isinstance(core.avx_supported(), bool)
    assert core.op_support_gpu("mul") == core.is_compiled_with_cuda()
    assert isinstance(core.Place(), core.Place)


def test_core_globals_reads_and_sets_the_flags():
    flags = core.globals()
    assert "FLAGS_check_nan_inf" in flags and flags.is_public("FLAGS_check_nan_inf")
    before = flags["FLAGS_check_nan_inf"]
    try:
        flags["FLAGS_check_nan_inf"] = True
        assert fluid.get_flags("FLAGS_check_nan_inf") == {"FLAGS_check_nan_inf": True}
    finally:
        flags["FLAGS_check_nan_inf"] = before
    with pytest.raises(KeyError):
        flags["FLAGS_no_such_flag"]  # noqa: B018


def test_feed_holders_round_trip():
    scope = core.Scope()
    core.set_feed_variable(scope, np.ones((2, 2), "float32"), "feed", 1)
    got = core.get_fetch_variable(scope, "feed", 1)
    np.testing.assert_array_equal(np.array(got), np.ones((2, 2)))
    with pytest.raises(IndexError):
        core.get_fetch_variable(scope, "feed", 5)


def test_profiler_switches():
    core.enable_profiler(core.ProfilerState.kCPU)
    assert core.is_profiler_enabled()
    main, startup, x, y, _ = _program()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y])
    core.disable_profiler(core.EventSortingKey.kTotal, "/dev/null")
    assert not core.is_profiler_enabled()


def test_layers_utils_nested_structures():
    from spmd.fluid.layers import utils

    Pair = collections.namedtuple("Pair", "a b")
    nest = [1, Pair(2, {"y": 4, "x": 3})]
    assert utils.flatten(nest) == [1, 2, 3, 4]
    assert utils.pack_sequence_as(nest, [5, 6, 7, 8]) == [5, Pair(6, {"x": 7, "y": 8})]
    assert utils.map_structure(lambda v: v * 10, nest) == [10, Pair(20, {"x": 30, "y": 40})]
    assert utils.is_sequence((1,)) and utils.is_sequence({}) and not utils.is_sequence("ab")
    assert utils.hold_mutable_vars([1, [2]]) and not utils.hold_mutable_vars([1, 2])
    copied = utils.copy_mutable_vars(nest)
    assert copied == nest and copied[1][1] is not nest[1][1]
    utils.assert_same_structure([1, (2, 3)], [4, (5, 6)])
    with pytest.raises(ValueError, match="same number of elements"):
        utils.assert_same_structure([1, 2], [1])
    with pytest.raises(TypeError, match="sequence type"):
        utils.assert_same_structure([1, 2], (1, 2))
    assert utils.convert_to_list(3, 2, "stride") == [3, 3]
    assert utils.convert_to_list((1, 2), 2, "stride") == [1, 2]
    with pytest.raises(ValueError, match="stride's length must be 2"):
        utils.convert_to_list((1, 2, 3), 2, "stride")


def test_unique_name_is_a_module_sharing_the_generator():
    import spmd.fluid.unique_name as unique_name

    with unique_name.guard():
        assert unique_name.generate("fc") == "fc_0"
        assert unique_name.generate("fc") == "fc_1"
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            x = fluid.data("x", [None, 2], "float32")
            y = fluid.layers.fc(x, 2)
        assert y.name.startswith("fc_2")
    old = unique_name.switch()
    unique_name.switch(old)


def test_data_and_rnn_are_functions_and_modules():
    module = importlib.import_module("spmd.fluid.data")
    assert callable(fluid.data) and module.data is fluid.data
    from spmd.fluid.data import data

    assert data is fluid.data
    rnn_module = importlib.import_module("spmd.fluid.layers.rnn")
    assert callable(fluid.layers.rnn) and rnn_module.LSTMCell is fluid.layers.LSTMCell
    assert rnn_module.rnn is fluid.layers.rnn


def test_data_loader_base_covers_every_loader():
    from spmd.fluid.reader import DataLoaderBase

    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 1], "float32")
        loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=2)
        reader = fluid.io.PyReader(feed_list=[x], capacity=2)
    assert isinstance(loader, DataLoaderBase) and isinstance(reader, DataLoaderBase)
    assert not isinstance(object(), DataLoaderBase)


def test_memory_usage_and_op_frequencies():
    main, _, _, _, _ = _program()
    low, high, unit = fluid.contrib.memory_usage(main, batch_size=2)
    assert unit == "B" and high > low > 0
    single, pairs = fluid.contrib.op_freq_statistic(main)
    assert dict(single)["mul"] == 1 and ("mul->elementwise_add", 1) in pairs
    with pytest.raises(TypeError):
        fluid.contrib.memory_usage("not a program", 2)


def test_decoupled_weight_decay_decays_then_updates():
    sgd_wd = fluid.contrib.extend_with_decoupled_weight_decay(fluid.optimizer.SGD)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        y = fluid.layers.fc(x, 1, bias_attr=False,
                            param_attr=fluid.ParamAttr(
                                name="w", initializer=fluid.initializer.Constant(1.0)))
        loss = fluid.layers.mean(y)
        sgd_wd(weight_decay=0.1, learning_rate=0.5).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        exe.run(main, feed={"x": np.array([[1.0, 3.0]], "float32")})
        w = np.array(scope.find_var("w").get_tensor())
    # w - 0.1 * w, then minus lr * grad (grad = x: the mean over one row)
    np.testing.assert_allclose(w.reshape(-1), [0.9 - 0.5 * 1.0, 0.9 - 0.5 * 3.0], rtol=1e-6)
    with pytest.raises(TypeError):
        fluid.contrib.extend_with_decoupled_weight_decay(object)


def test_fp16_utils_find_ops():
    from spmd.fluid.contrib.mixed_precision import fp16_utils

    main, _, x, y, _ = _program()
    ops = main.global_block().ops
    mul = next(op for op in ops if op.type == "mul")
    assert fp16_utils.find_true_prev_op(ops, ops[-1], mul.output_arg_names[0]) is mul
    assert fp16_utils.find_op_index(main.global_block(), mul) == ops.index(mul)
    assert fp16_utils.find_true_post_op(ops, ops[-1], "nothing") is None


def test_missing_names_say_where_to_look():
    import spmd.fluid.trainer_desc as trainer_desc

    with pytest.raises(AttributeError, match="docs/fluid_coverage.md"):
        trainer_desc.TrainerDesc  # noqa: B018
    import spmd.fluid.contrib.slim.quantization as quantization

    with pytest.raises(AttributeError, match="fluid.contrib.slim.quantization."):
        quantization.QuantizationTransformPass  # noqa: B018


def test_a_dtype_compares_with_vartype_as_in_fluid():
    _, _, x, _, _ = _program()
    vt = core.VarDesc.VarType
    assert x.dtype == vt.FP32 and not x.dtype != vt.FP32 and x.dtype != vt.INT64
    assert {vt.FP32: "f"}[5] == "f"


def test_variable_kinds_compare_with_var_type():
    _, _, x, _, _ = _program()
    vt = core.VarDesc.VarType
    assert x.type == vt.LOD_TENSOR and x.type != vt.SELECTED_ROWS
    from spmd.fluid.layers.device import get_places

    with fluid.program_guard(fluid.Program(), fluid.Program()):
        assert get_places(device_count=1).type == vt.PLACE_LIST


def test_fetch_list_and_tensor_array_of_a_scope_variable():
    scope = core.Scope()
    t = core.LoDTensor()
    t.set(np.ones((2, 2), "float32"), fluid.CPUPlace())
    t.set_recursive_sequence_lengths([[1, 1]])
    scope.var("fetch").get_fetch_list().append(t)
    assert core.get_fetch_variable(scope, "fetch", 0).recursive_sequence_lengths() == [[1, 1]]
    array = scope.var("arr").get_lod_tensor_array()
    assert len(array) == 0
    array.append(t)
    assert len(scope.var("arr").get_lod_tensor_array()) == 1
