"""Behaviour of fluid 1.8's smaller modules spmd.fluid provides: fluid.op's Operator run on a
scope, backward's and framework's name helpers, executor's FetchHandler / _as_lodtensor,
annotations, average, default_scope_funcs, distribute_lookup_table, multiprocess_utils,
communicator, dataloader, layer_helper."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import spmd.fluid as fluid


def test_operator_runs_one_op_on_a_scope():
    from spmd.fluid.op import Operator

    scope, place = fluid.Scope(), fluid.CPUPlace()
    x = np.array([[1.0, 2.0], [3.0, 4.0]], "float32")
    y = np.array([[1.0], [1.0]], "float32")
    scope.var("x").get_tensor().set(x, place)
    scope.var("y").get_tensor().set(y, place)
    mul = Operator("mul", X="x", Y="y", Out="out", x_num_col_dims=1)
    assert mul.type() == "mul" and mul.input("X") == ["x"] and mul.attr("x_num_col_dims") == 1
    mul.run(scope, place)
    np.testing.assert_array_equal(np.array(scope.find_var("out").get_tensor()), x @ y)
    scope.var("a").get_tensor().set(np.ones(2, "float32"), place)
    scope.var("b").get_tensor().set(np.full(2, 2.0, "float32"), place)
    Operator("sum", X=["a", "b"], Out="s").run(scope, place)  # a duplicable slot
    np.testing.assert_array_equal(np.array(scope.find_var("s").get_tensor()), [3.0, 3.0])


def test_operator_errors_name_the_slot():
    from spmd.fluid.op import Operator, is_str

    with pytest.raises(ValueError, match="input slot"):
        Operator("mul", Out="o")
    op = Operator("relu", X="nothing", Out="o")
    with pytest.raises(ValueError, match="'nothing' has no value"):
        op.run(fluid.Scope(), fluid.CPUPlace())
    assert is_str("a") and not is_str(1)


def test_name_helpers():
    from spmd.fluid import backward, framework

    assert framework.grad_var_name("w") == backward._append_grad_suffix_("w") == "w@GRAD"
    assert backward._strip_grad_suffix_("w@GRAD@RENAME@0") == "w"
    assert framework.convert_np_dtype_to_dtype_(np.float32) == fluid.core.VarDesc.VarType.FP32
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 2], "float32")
        y = fluid.layers.reduce_sum(fluid.layers.fc(x, 1))
        # fluid 1.8.5: calc_gradient gives one input's gradient as a Variable, gradients a list
        single, listed = backward.calc_gradient(y, x), fluid.gradients(y, x)
    assert isinstance(single, fluid.Variable) and isinstance(listed, list)
    assert single.name.endswith("x@GRAD") and listed[0].name.endswith("x@GRAD")
    assert "x@GRAD" in backward._get_stop_gradients_(main)[0]


def test_fetch_handler_and_as_lodtensor(capsys):
    from spmd.fluid.executor import FetchHandler, _as_lodtensor

    handler = FetchHandler(var_dict={"loss": "loss"}, period_secs=5)
    handler.handler({"loss": np.array([0.5, 1.0])})
    assert "loss[0]: 0.5" in capsys.readouterr().out
    with pytest.raises(ValueError):
        FetchHandler()
    t = _as_lodtensor(3.0, fluid.CPUPlace(), "float32")
    assert t.shape() == [1] and np.array(t).dtype == np.float32


def test_deprecated_prints_and_documents(capsys):
    from spmd.fluid.annotations import deprecated

    @deprecated("1.5", "fluid.new")
    def old(a):
        """Doc."""
        return a + 1

    assert old(1) == 2
    assert "API old is deprecated since 1.5. Please use fluid.new instead." in (
        capsys.readouterr().err)


def test_weighted_average():
    from spmd.fluid.average import WeightedAverage

    with pytest.warns(Warning, match="deprecated"):
        avg = WeightedAverage()
    avg.add(np.array([1.0, 3.0]), 2)
    avg.add(np.array([4.0, 0.0]), 1)
    np.testing.assert_allclose(avg.eval(), [2.0, 2.0])
    avg.reset()
    with pytest.raises(ValueError, match="no data"):
        avg.eval()
    with pytest.raises(ValueError, match="weight"):
        avg.add(1.0, "w")


def test_default_scope_funcs_stack():
    from spmd.fluid import default_scope_funcs as dsf

    root = dsf.get_cur_scope()
    seen = []

    def body():
        seen.append(dsf.get_cur_scope())
        dsf.var("t").get_tensor().set(np.ones(1, "float32"))
        assert dsf.find_var("t") is not None

    dsf.scoped_function(body)
    assert seen[0] is not root and dsf.get_cur_scope() is root and root.find_var("t") is None


def test_distributed_lookup_table_rules():
    from spmd.fluid import distribute_lookup_table as dlt

    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        ids = fluid.data("ids", [None, 1], "int64")
        emb = fluid.layers.embedding(ids, [10, 4], is_distributed=True,
                                     param_attr=fluid.ParamAttr(name="t"))
        fluid.layers.embedding(ids, [10, 4], param_attr=fluid.ParamAttr(name="local"))
    assert dlt.find_distributed_lookup_table(main) == "t"
    assert [v.name for v in dlt.find_distributed_lookup_table_outputs(main, "t")] == [emb.name]
    plain = fluid.Program()
    with fluid.program_guard(plain, fluid.Program()):
        ids = fluid.data("ids", [None, 1], "int64")
        fluid.layers.embedding(ids, [10, 4])
    assert dlt.find_distributed_lookup_table(plain) is None


def test_cleanup_registrar_runs_once():
    from spmd.fluid.multiprocess_utils import CleanupFuncRegistrar

    calls = []

    def cleanup():
        calls.append(1)

    CleanupFuncRegistrar.register(cleanup)
    CleanupFuncRegistrar.register(cleanup)  # twice: still once
    CleanupFuncRegistrar._run_once(cleanup)
    CleanupFuncRegistrar._run_once(cleanup)
    assert calls == [1]
    with pytest.raises(TypeError):
        CleanupFuncRegistrar.register("not callable")


def test_communicator_needs_a_trainer_program():
    from spmd.fluid.communicator import Communicator

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        fluid.optimizer.SGD(0.1).minimize(loss)
    with pytest.raises(ValueError, match="no send/recv ops"):
        Communicator(main)
    config = fluid.DistributeTranspilerConfig()
    config.sync_mode = False
    t = fluid.DistributeTranspiler(config)
    t.transpile(0, program=main, pservers="127.0.0.1:6174", trainers=1,
                startup_program=startup, sync_mode=False)
    comm = Communicator(t.get_trainer_program(wait_port=False))
    comm.start()
    assert comm.is_running()
    comm.stop()
    assert not comm.is_running()


def test_dataloader_dataset_and_batch_sampler():
    from spmd.fluid.dataloader import BatchSampler, Dataset
    from spmd.fluid.dataloader.dataloader_iter import default_collate_fn

    class Five(Dataset):
        def __getitem__(self, i):
            return [np.full(2, i, "float32"), np.int64(i)]

        def __len__(self):
            return 5

    sampler = BatchSampler(dataset=Five(), batch_size=2, drop_last=False)
    batches = list(sampler)
    assert batches == [[0, 1], [2, 3], [4]] and len(sampler) == 3
    images, labels = default_collate_fn([Five()[i] for i in batches[0]])
    assert images.shape == (2, 2) and list(labels) == [0, 1]
    with pytest.raises(TypeError, match="__len__"):
        len(Dataset())
    with pytest.raises(ValueError):
        BatchSampler(dataset=Five(), indices=[1])
    np.random.seed(0)
    shuffled = [i for b in BatchSampler(indices=list(range(6)), shuffle=True, batch_size=4)
                for i in b]
    assert sorted(shuffled) == list(range(6))


def test_layer_helper_builds_a_custom_layer():
    from spmd.fluid.layer_helper import LayerHelper
    from spmd.fluid.layer_helper_base import LayerHelperBase

    assert LayerHelperBase is LayerHelper
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        helper = LayerHelper("my_scale")
        w = helper.create_parameter(fluid.ParamAttr(name="my_w"), [3], "float32")
        out = helper.create_variable_for_type_inference("float32")
        helper.append_op("elementwise_mul", {"X": [x], "Y": [w]}, {"Out": [out]}, {})
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = exe.run(main, feed={"x": np.ones((1, 3), "float32")}, fetch_list=[out])[0]
    assert got.shape == (1, 3)


def test_core_modes_accept_fluids_calls_and_change_no_number():
    def train_two_steps():
        main, startup = fluid.Program(), fluid.Program()
        main.random_seed = startup.random_seed = 7
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            x = fluid.data("x", [None, 3], "float32")
            loss = fluid.layers.mean(fluid.layers.fc(x, 2))
            fluid.optimizer.SGD(0.1).minimize(loss)
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        feed = {"x": np.arange(12, dtype="float32").reshape(4, 3)}
        with fluid.scope_guard(scope):
            exe.run(startup)
            return [exe.run(main, feed, [loss])[0] for _ in range(2)]

    before = train_two_steps()
    fluid.core._set_eager_deletion_mode(0.0, 1.0, True)
    fluid.core._set_fuse_parameter_group_size(3)
    after = train_two_steps()
    np.testing.assert_array_equal(np.array(after), np.array(before))
    assert before[0] != before[1]  # the steps trained


def test_layer_function_generator():
    from spmd.fluid.layers import layer_function_generator as lfg

    add = lfg.generate_layer_fn("elementwise_add")
    sigmoid = lfg.generate_activation_fn("sigmoid")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.data("a", [None, 2], "float32")
        b = fluid.data("b", [None, 2], "float32")
        c = add(a, y=b, axis=-1)
        s = sigmoid(a)
        with pytest.raises(ValueError, match="must be variable"):
            add(a, y=3.0)
    exe = fluid.Executor(fluid.CPUPlace())
    got_c, got_s = exe.run(main, feed={"a": np.zeros((1, 2), "float32"),
                                       "b": np.ones((1, 2), "float32")}, fetch_list=[c, s])
    np.testing.assert_array_equal(got_c, [[1.0, 1.0]])
    np.testing.assert_allclose(got_s, [[0.5, 0.5]])

    @lfg.deprecated
    def old():
        return 1

    with pytest.warns(DeprecationWarning, match="old"):
        assert old() == 1

    @lfg.templatedoc()
    def documented():
        """${comment} Kept text."""

    assert documented.__doc__.strip() == "Kept text."
    assert lfg.autodoc(" more")(documented).__doc__.endswith(" more")


def test_fleet_version_is_the_transpiler():
    from spmd.fluid.incubate.fleet.parameter_server.version import is_transpiler

    assert is_transpiler()


def test_collective_op_based_optimizer_passes_through():
    from spmd.fluid.incubate.fleet.collective import (
        CollectiveOpBasedOptimizer,
        DistFCConfig,
        DistributedStrategy,
        LambConfig,
    )

    assert LambConfig() is not None and DistFCConfig() is not None
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        opt = CollectiveOpBasedOptimizer(fluid.optimizer.SGD(0.1), DistributedStrategy())
        params_grads = opt.backward(loss)
        ops = opt.apply_gradients(params_grads)
    assert len(params_grads) == 2 and [op.type for op in ops] == ["sgd", "sgd"]
    with pytest.raises(TypeError, match="DistributedStrategy"):
        CollectiveOpBasedOptimizer(fluid.optimizer.SGD(0.1))


def test_control_flow_building_blocks():
    from spmd.fluid.layers import control_flow as cf

    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 2], "float32")
        mask = fluid.data("mask", [None, 1], "bool")
        yes, no = cf.split_lod_tensor(x, mask)
        back = cf.merge_lod_tensor(yes, no, x, mask)
    xv = np.arange(8, dtype="float32").reshape(4, 2)
    mv = np.array([[True], [False], [True], [False]])
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "mask": mv},
                                               fetch_list=[yes, no, back])
    np.testing.assert_array_equal(got[0], xv[[0, 2]])
    np.testing.assert_array_equal(got[1], xv[[1, 3]])
    np.testing.assert_array_equal(got[2], xv)
    assert cf.ConditionalBlock is not None and callable(cf.select_input)


def test_small_fluid_switches():
    from spmd.fluid.reader import keep_data_loader_order

    assert keep_data_loader_order() is True
    keep_data_loader_order(False)
    assert keep_data_loader_order() is False
    keep_data_loader_order(True)
    with pytest.raises(TypeError):
        keep_data_loader_order(1)
    with pytest.raises(fluid.core.EnforceNotMet):
        fluid.core.__unittest_throw_exception__()
    from spmd.fluid.optimizer import append_regularization_ops

    assert callable(append_regularization_ops)


def test_names_programs_use_beyond_all():
    from spmd.fluid import data_feeder, framework, io, unique_name
    from spmd.fluid.executor import _fetch_var

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        fluid.layers.fc(x, 1, param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.Constant(0.5)))
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(fluid.CPUPlace()).run(startup)
        np.testing.assert_array_equal(_fetch_var("w"), np.full((2, 1), 0.5, "float32"))
        assert _fetch_var("w", return_numpy=False).shape() == [2, 1]
        with pytest.raises(KeyError, match="persistable"):
            _fetch_var("nothing")
    assert framework._get_var("w", main).shape == (2, 1)
    assert isinstance(framework._current_expected_place(), (fluid.CPUPlace, fluid.CUDAPlace))
    with pytest.raises(RuntimeError, match="dygraph"):
        framework.dygraph_only(lambda: 1)()
    assert io._get_valid_program(main) is main
    assert io._get_valid_program(fluid.CompiledProgram(main)) is main
    with pytest.raises(TypeError):
        io._get_valid_program("main")
    data_feeder.check_variable_and_dtype(x, "x", ["float32"], "layer")
    with pytest.raises(TypeError, match="must be"):
        data_feeder.check_dtype("int64", "x", ["float32"], "layer")
    with pytest.raises(TypeError):
        data_feeder.check_type(1, "x", fluid.Variable, "layer")
    with unique_name.guard():
        assert unique_name.generate_with_ignorable_key("a") == "a_0"


def test_fleet_program_file_helpers(tmp_path):
    from spmd.fluid.incubate.fleet.utils import utils

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1, param_attr=fluid.ParamAttr(name="w")))
    utils.save_program(main, str(tmp_path / "m.txt"), is_text=True)
    out_fn = utils.program_type_trans(str(tmp_path), "m.txt", True)
    assert out_fn == "m.txt.bin"
    back = utils.load_program(str(tmp_path / out_fn))
    assert [op.type for op in back.global_block().ops] == [
        op.type for op in main.global_block().ops]
    pruned = main._prune([loss])
    assert utils.check_pruned_program_vars(main, pruned)
    other = fluid.Program()
    with fluid.program_guard(other, fluid.Program()):
        x = fluid.data("x", [None, 3], "float32")
        fluid.layers.fc(x, 1, param_attr=fluid.ParamAttr(name="w"))
    assert not utils.check_pruned_program_vars(main, other)  # w has another shape there
    utils.parse_program(main, str(tmp_path / "parsed"))
    assert "w" in (tmp_path / "parsed" / "persistable_vars.txt").read_text()
    utils.graphviz(main.global_block(), str(tmp_path), "g")
    assert (tmp_path / "g.dot").read_text().startswith("digraph")


def test_model_stat_counts_as_fluid(capsys):
    from spmd.fluid.contrib.model_stat import summary

    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        img = fluid.data("img", [None, 3, 8, 8], "float32")
        y = fluid.layers.conv2d(img, 4, 3, act="relu")
        z = fluid.layers.pool2d(y, 2, pool_stride=2)
        fluid.layers.fc(z, 5)
        fluid.layers.batch_norm(y)
    rows, totals = summary(main)
    got = [(r["type"], r["input_shape"], r["out_shape"], r["PARAMs"], r["FLOPs"]) for r in rows]
    # fluid 1.8.5's _summary_model on the same program (its relu FLOPs come out -144 there:
    # it multiplies the batch's -1 in)
    assert got == [("conv2d", (3, 8, 8), (4, 6, 6), 108, 7776),
                   ("relu", (4, 6, 6), (4, 6, 6), 0, 144),
                   ("pool2d", (4, 6, 6), (4, 3, 3), 0, 144),
                   ("mul", (4, 3, 3), (5,), 181, 180),
                   ("batch_norm", (4, 6, 6), (4, 6, 6), 8, 288)]
    assert totals == (297, 8532) and "Total FLOPs: 8532" in capsys.readouterr().out
