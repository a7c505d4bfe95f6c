"""fluid 1.8's members of Program, Block, Variable and Operator that real programs use beyond
the IR (spmd/core/fluid_compat.py), and the transpiler's marks on the programs it makes."""
from __future__ import annotations

import io

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fluid.transpiler.details import program_utils


def _net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        h = fluid.layers.fc(x, 4, act="relu")
        y = fluid.layers.fc(h, 2)
        z = fluid.layers.reduce_sum(x)  # not needed for y
        loss = fluid.layers.mean(y)
    return main, startup, x, h, y, z, loss


def test_program_distributed_attributes_default_and_travel_with_clones():
    main = _net()[0]
    assert (main._is_distributed, main._is_chief, main._endpoints, main._ps_endpoint,
            main._trainers_endpoints, main._distributed_lookup_table) == (
        False, False, [], None, [], None)
    main._is_distributed, main._endpoints = True, ["127.0.0.1:6174"]
    clone = main.clone(for_test=True)
    assert clone._is_distributed and clone._endpoints == ["127.0.0.1:6174"]
    other = fluid.Program()
    other._copy_dist_param_info_from(main)
    assert other._is_distributed


def test_prune_keeps_the_ops_a_target_needs():
    main, startup, x, h, y, z, loss = _net()
    pruned = main._prune([y])
    types = [op.type for op in pruned.global_block().ops]
    assert "reduce_sum" not in types and "mean" not in types and types.count("mul") == 2
    from_h = main._prune_with_input([h.name], [y])
    assert [op.type for op in from_h.global_block().ops] == ["mul", "elementwise_add"]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    full = exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y])[0]
    got = exe.run(pruned, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y.name])[0]
    np.testing.assert_array_equal(got, full)
    test = main._inference_optimize()
    assert test.is_test


def test_optimized_guard_marks_optimizer_ops():
    main, startup, x, h, y, z, loss = _net()
    with fluid.program_guard(main, startup):
        with main._optimized_guard([]):
            fluid.layers.scale(y, 2.0)
        with main._lr_schedule_guard():
            fluid.layers.scale(y, 3.0)
    from spmd.core.operator import OpRole

    assert [op.role for op in main.global_block().ops[-2:]] == [OpRole.OPTIMIZE,
                                                               OpRole.FORWARD]


def test_copy_param_info_from_takes_trainable_and_regularizer():
    main = _net()[0]
    other = main.clone()
    param = main.global_block().all_parameters()[0]
    param.trainable = False
    other._copy_param_info_from(main)
    assert not other.global_block().var(param.name).trainable


def test_seed_and_current_block_idx():
    main = fluid.Program()
    main.global_seed(7)
    assert main.random_seed == main._seed == 7
    main._seed = 3
    assert main.random_seed == 3 and main.current_block_idx == 0
    main._create_block()
    assert main.current_block_idx == 1
    main._rollback()


def test_block_rename_remove_and_clone_variable():
    main, startup, x, h, y, z, loss = _net()
    block = main.global_block()
    block._rename_var(h.name, "hidden")
    assert "hidden" in block.vars and any("hidden" in op.input_arg_names for op in block.ops)
    block._remove_var(z.name)
    assert z.name not in block.vars and z.name in block.removed_vars
    other = fluid.Program().global_block()
    copy = other._clone_variable(y)
    assert copy.name == y.name and copy.shape == y.shape and copy.persistable
    assert block.forward_block_idx == -1 and isinstance(block.to_string(True), str)


def test_variable_op_astype_and_to_string():
    main, startup, x, h, y, z, loss = _net()
    assert y.op.type == "elementwise_add" and x.op is None
    with fluid.program_guard(main, startup):
        as_int = y.astype("int64")
    assert as_int.dtype == "int64" and as_int.op.type == "cast"
    assert y.name in y.to_string(True, with_details=True) and not y.belong_to_optimizer
    assert main.global_block().all_parameters()[0].is_distributed is False


def test_operator_renames_and_block_attrs():
    main, startup, x, h, y, z, loss = _net()
    op = main.global_block().ops[0]
    assert op.attr_names == sorted(op.all_attrs())
    op._rename_input("x", "x2")
    assert op.input_arg_names[0] == "x2"
    op._update_desc_attr("x_num_col_dims", 1)
    assert op.attr("x_num_col_dims") == 1
    assert "while" in op.OP_WITHOUT_KERNEL_SET
    rnn_main = fluid.Program()
    with fluid.program_guard(rnn_main, fluid.Program()):
        seq = fluid.data("seq", [4, None, 2], "float32")
        rnn = fluid.layers.StaticRNN()
        with rnn.step():
            step = rnn.step_input(seq)
            rnn.step_output(fluid.layers.scale(step, 2.0))
        rnn()
    recurrent = next(o for o in rnn_main.global_block().ops if o.type == "recurrent")
    assert recurrent._block_attr("sub_block").idx == 1


def test_program_to_code_lists_vars_and_ops():
    main = _net()[0]
    out = io.StringIO()
    program_utils.program_to_code(main, fout=out)
    text = out.getvalue()
    assert text.startswith("{ // block 0") and "trainable parameter" in text
    assert "= mul(inputs={X=['x'], Y=" in text
    block = main.global_block()
    first_mean = program_utils.find_op_by_output_arg(block, block.ops[-1].output_arg_names[0])
    assert first_mean == len(block.ops) - 1
    program_utils.delete_ops(block, [block.ops[-1]])
    assert block.ops[-1].type != "mean"


def test_pserver_transpile_marks_the_programs():
    main, startup, x, h, y, z, loss = _net()
    with fluid.program_guard(main, startup):
        fluid.optimizer.SGD(0.1).minimize(loss)
    t = fluid.DistributeTranspiler()
    eps = "127.0.0.1:6174,127.0.0.1:6175"
    t.transpile(0, program=main, pservers=eps, trainers=2, startup_program=startup,
                current_endpoint="127.0.0.1:6174")
    assert main._is_distributed and main._is_chief and main._endpoints == eps.split(",")
    assert main._distributed_lookup_table is None
    pserver, _ = t.get_pserver_programs("127.0.0.1:6175")
    assert pserver._is_distributed and pserver._ps_endpoint == "127.0.0.1:6175"
    assert t.get_trainer_program(wait_port=False)._is_distributed


def test_geo_transpiler_and_slices():
    from spmd.fluid.transpiler import GeoSgdTranspiler
    from spmd.fluid.transpiler.distribute_transpiler import (
        DistributedMode,
        VarBlock,
        same_or_split_var,
    )

    assert GeoSgdTranspiler().config.geo_sgd_mode
    assert str(VarBlock("w", 1, 20)) == "w:1:20" and DistributedMode.GEO == 3
    assert same_or_split_var("w.block0", "w") and not same_or_split_var("w2", "w")


def test_wait_server_ready_returns_once_listening():
    import socket

    from spmd.fluid.transpiler.details import wait_server_ready

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        wait_server_ready([f"127.0.0.1:{server.getsockname()[1]}"])
    with pytest.raises(TypeError):
        wait_server_ready("127.0.0.1:1")


def test_parameters_on_pservers_cover_each_parameter():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 1000], "float32")
        y = fluid.layers.fc(x, 1000, param_attr=fluid.ParamAttr(name="fc_w"),
                            bias_attr=fluid.ParamAttr(name="fc_b"))
        fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(y))
    t = fluid.DistributeTranspiler()
    eps = ["127.0.0.1:6174", "127.0.0.1:6175"]
    t.transpile(0, program=main, pservers=",".join(eps), trainers=2, startup_program=startup)
    assert t.has_distributed_lookup_table is False
    pserver, _ = t.get_pserver_programs(eps[0])
    overview = pserver._parameters_on_pservers
    pieces = [v for ep in eps for v in overview.get_distributed_vars_by_ep(ep)
              if v.origin.name == "fc_w"]
    assert sum(int(np.prod(v.slice.shape)) for v in pieces) == 1000 * 1000
    assert all(v.is_slice for v in pieces) and len(pieces) == 2


def test_desc_views_answer_what_programs_ask():
    main, startup, x, h, y, z, loss = _net()
    with fluid.program_guard(main, startup), fluid.name_scope("head"):
        fluid.layers.relu(y)
    desc = main.desc
    restored = fluid.Program.parse_from_string(desc.serialize_to_string())
    assert [op.type for op in restored.global_block().ops] == [
        op.type for op in main.global_block().ops]
    assert desc.num_blocks() == 1 and desc.block(0).op_size() == len(main.global_block().ops)
    op_desc = main.global_block().ops[-1].desc
    assert op_desc.type() == "relu" and op_desc.attr("op_namescope") == "/head/"
    assert op_desc.input("X") == [y.name] and op_desc.has_attr("op_namescope")
    block = main.global_block().desc
    assert block.id == 0 and block.parent == -1 and block.has_var("x")
    assert block.var("x").name() == "x" and block.op(0).type() == "mul"
    desc.flush()
