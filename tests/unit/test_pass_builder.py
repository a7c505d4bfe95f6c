"""BuildStrategy._finalize_strategy_and_create_passes: fluid 1.8's PassBuilder. The pass lists
are fluid 1.8.5's for the same strategies (printed by fluid 1.8.5: all_passes() types); a
graph_viz_pass given a graph_viz_path writes the compiled program there."""
import os

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

TAIL_ALLREDUCE = ["add_reader_dependency_pass", "all_reduce_mode_multi_devices_pass"]
FLUID_185 = [  # (strategy fields, fluid 1.8.5's pass types)
    ({}, ["coalesce_grad_tensor_pass", *TAIL_ALLREDUCE, "fuse_all_reduce_op_pass",
          "all_reduce_deps_pass", "modify_op_lock_and_record_event_pass",
          "multi_devices_check_pass"]),
    ({"fuse_all_reduce_ops": False}, [*TAIL_ALLREDUCE, "all_reduce_deps_pass",
                                      "modify_op_lock_and_record_event_pass",
                                      "multi_devices_check_pass"]),
    ({"fuse_all_optimizer_ops": True, "fuse_all_reduce_ops": False},
     ["fuse_adam_op_pass", "fuse_sgd_op_pass", "fuse_momentum_op_pass", *TAIL_ALLREDUCE,
      "all_reduce_deps_pass", "modify_op_lock_and_record_event_pass",
      "multi_devices_check_pass"]),
    ({"reduce_strategy": fluid.BuildStrategy.ReduceStrategy.Reduce, "fuse_all_optimizer_ops": True,
      "debug_graphviz_path": "/tmp/x"},
     ["graph_viz_pass", "graph_viz_pass", "add_reader_dependency_pass",
      "reduce_mode_multi_devices_pass", "multi_devices_print_pass",
      "modify_op_lock_and_record_event_pass", "multi_devices_check_pass"]),
    ({"fuse_relu_depthwise_conv": True, "fuse_bn_act_ops": True, "fuse_elewise_add_act_ops": True,
      "enable_sequential_execution": True, "sync_batch_norm": True, "debug_graphviz_path": "/y"},
     ["graph_viz_pass", "sequential_execution_pass", "sync_batch_norm_pass",
      "fuse_relu_depthwise_conv_pass", "fuse_bn_act_pass", "fuse_elewise_add_act_pass",
      "coalesce_grad_tensor_pass", "graph_viz_pass", *TAIL_ALLREDUCE, "fuse_all_reduce_op_pass",
      "multi_devices_print_pass", "all_reduce_deps_pass", "modify_op_lock_and_record_event_pass",
      "multi_devices_check_pass"]),
]


@pytest.mark.parametrize("settings, expected", FLUID_185)
def test_pass_list_is_fluids(settings, expected):
    bs = fluid.BuildStrategy()
    for name, value in settings.items():
        setattr(bs, name, value)
    builder = bs._finalize_strategy_and_create_passes()
    assert [p.type() for p in builder.all_passes()] == expected
    assert bs._finalize_strategy_and_create_passes() is builder  # kept with the strategy


def test_append_insert_remove_and_attributes():
    bs = fluid.BuildStrategy()
    bs.debug_graphviz_path = "/tmp/g"
    builder = bs._finalize_strategy_and_create_passes()
    first = builder.all_passes()[0]
    assert first.has("graph_viz_path")  # from debug_graphviz_path, as fluid
    with pytest.raises(fluid.core.EnforceNotMet, match="already has the attribute"):
        first.set("graph_viz_path", "/tmp/other")
    n = len(builder.all_passes())
    added = builder.append_pass("graph_viz_pass")
    assert not added.has("graph_viz_path") and len(builder.all_passes()) == n + 1
    builder.insert_pass(0, "graph_viz_pass")
    assert len(builder.all_passes()) == n + 2
    builder.remove_pass(0)
    assert builder.all_passes()[-1] is added
    with pytest.raises(InvalidArgumentError, match="outside"):
        builder.remove_pass(n + 5)


def _net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, size=2))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
    return main, startup, loss


@pytest.mark.parametrize("data_parallel", [True, False])
def test_an_appended_graph_viz_pass_writes_the_compiled_program(tmp_path, monkeypatch,
                                                                data_parallel):
    monkeypatch.setenv("CPU_NUM", "2")
    main, startup, loss = _net()
    bs = fluid.BuildStrategy()
    builder = bs._finalize_strategy_and_create_passes()
    path = tmp_path / "viz.dot"
    builder.append_pass("graph_viz_pass").set("graph_viz_path", str(path))
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main, build_strategy=bs)
    if data_parallel:
        compiled = compiled.with_data_parallel(loss_name=loss.name)
    assert not path.exists()
    exe.run(compiled, feed={"x": np.ones((4, 3), "float32")}, fetch_list=[loss], scope=scope)
    text = path.read_text()
    assert text.startswith("digraph program {") and "sgd" in text
    assert ("c_allreduce_sum" in text or "allreduce" in text) == data_parallel
    assert os.path.getsize(path) > 0
