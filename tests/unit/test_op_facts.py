"""Per-op facts are fields of the op's OpDef / KernelDef, declared where it is defined: the
passes and the SSA executor read them there. nadam's update, elementwise on its own slots,
is movable: memory_optimize schedules it right after its gradient, with bitwise the numbers."""
from __future__ import annotations

import numpy as np

import spmd as paddle
import spmd.fluid as fluid
from spmd.executor.ssa import in_program_order
from spmd.kernels.registry import kernel_def
from spmd.ops.registry import OP_DEFS, get_op_def
from spmd.passes.memory_optimize import hoist_updates


def _nadam_mlp():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        y = fluid.data("y", [None, 2], "float32")
        h = fluid.layers.fc(fluid.layers.fc(x, 5, act="tanh"), 3, act="tanh")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 2), y))
        paddle.optimizer.NAdam(learning_rate=0.01).minimize(loss)
    return main, startup, loss


def test_every_optimizer_update_op_that_is_row_separable_is_movable():
    separable = {t for t, d in OP_DEFS.items() if d.row_separable and d.grad is None}
    updates = {t for t in separable if "ParamOut" in get_op_def(t).output_slots
               or "param_out" in get_op_def(t).output_slots}
    assert "nadam" in updates and "adam" in updates
    assert all(get_op_def(t).movable for t in updates)
    assert get_op_def("lamb").movable and not get_op_def("lamb").row_separable


def test_nadam_updates_move_next_to_their_gradients():
    main, _, _ = _nadam_mlp()
    ops = main.global_block().ops
    assert [op.type for op in ops][-1] == "nadam"
    program = main.clone()
    assert hoist_updates(program.global_block()) == 6 - 1  # the first layer's stays last
    ops = program.global_block().ops
    for i, op in enumerate(ops):
        if op.type == "nadam":
            grad = op.input("grad")[0]
            writer = max(j for j in range(i) if grad in ops[j].output_arg_names)
            assert all(o.type == "nadam" for o in ops[writer + 1:i]), (writer, i)


def _train(memory_optimize: bool):
    main, startup, loss = _nadam_mlp()
    bs = fluid.BuildStrategy()
    bs.memory_optimize = memory_optimize
    compiled = fluid.CompiledProgram(main, build_strategy=bs)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(1)
    losses = []
    for _ in range(3):
        feed = {"x": rng.standard_normal((6, 4)).astype("float32"),
                "y": rng.standard_normal((6, 2)).astype("float32")}
        losses.append(exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)[0])
    return np.array(losses)


def test_nadam_with_memory_optimize_gives_bitwise_the_same_losses():
    np.testing.assert_array_equal(_train(True), _train(False))


def test_the_ssa_order_facts_come_from_the_definitions():
    assert get_op_def("py_func").side_effects and get_op_def("load").side_effects
    assert in_program_order("py_func") and in_program_order("checkpoint_notify")
    assert kernel_def("sgd").context and kernel_def("sgd").pure
    assert not in_program_order("sgd") and not in_program_order("fused_adam")
    assert kernel_def("sgd").inplace == frozenset({"ParamOut"})
    assert kernel_def("sgd").spends == ("Grad",)


# The parameter-server ops' kernels call the pserver RPC client (spmd/ps), which spmd/kernels,
# below ps in the layering (test_imports.py), must not import: they live in spmd/ps/kernels.py.
KERNELS_ABOVE_KERNELS = {"spmd.ops.distributed": "spmd.ps.kernels"}


def test_an_ops_definition_and_its_kernel_live_in_modules_of_one_name():
    """CONTRIBUTING's rule, read from the lazy indexes: ops/X.py's ops run kernels/X.py's
    kernels (or, for the modules above, their named kernel module)."""
    from spmd.lazy import read_index

    ops, kernels = read_index("spmd.ops.op_index"), read_index("spmd.kernels.kernel_index")
    apart = {}
    for op_type, op_module in ops.items():
        kernel_module = kernels.get(op_type)
        if kernel_module is None:
            continue  # an op run by the executor itself (feed, while's block), no kernel
        expected = KERNELS_ABOVE_KERNELS.get(
            op_module, "spmd.kernels." + op_module.rsplit(".", 1)[1])
        if kernel_module != expected:
            apart[op_type] = (op_module, kernel_module)
    assert not apart, apart


def test_parameter_server_ops_name_the_job_their_program_runs_as():
    """A program holding send / recv / listen_and_serv runs as parameter-server mode's job;
    the op says so (OpDef.job_kind), and the executor's table of kinds lists none of them."""
    import importlib

    from spmd.executor.job import JOB_KINDS
    from spmd.ops.registry import OP_DEFS, get_op_def

    assert get_op_def("listen_and_serv").job_kind == "spmd.ps.jobs:PServerJob"
    for op_type in ("send", "recv", "send_barrier", "fetch_barrier", "checkpoint_notify",
                    "distributed_lookup_table"):
        assert get_op_def(op_type).job_kind == "spmd.ps.jobs:TrainerJob", op_type
    for path in {d.job_kind for d in OP_DEFS.values() if d.job_kind}:
        module, _, name = path.partition(":")
        assert isinstance(getattr(importlib.import_module(module), name), type), path
    assert not set(JOB_KINDS) & set(OP_DEFS)


def test_wait_ops_say_they_pass_their_inputs_through():
    """The fused buckets keep a gradient's view across a wait op (executor/buckets.py reads
    OpDef.passes_inputs_through, no op type)."""
    from spmd.ops.registry import OP_DEFS, get_op_def

    assert get_op_def("c_sync_comm_stream").passes_inputs_through
    assert get_op_def("c_sync_calc_stream").passes_inputs_through
    assert not get_op_def("c_allreduce_sum").passes_inputs_through
    assert {t for t, d in OP_DEFS.items() if d.passes_inputs_through} == {
        "c_sync_comm_stream", "c_sync_calc_stream"}
