"""No-need-buffer inputs (fluid's DECLARE_NO_NEED_BUFFER_VARS_INFERER): a value whose later
readers read only its shape (elementwise_add_grad's X and Y, mul_grad's Out, mean_grad's X) is
replaced in the run by a shape-only stand-in after its last data reader (executor/liveness.py,
stand_in.py), so its buffer is freed there or lent to that reader (the fc's bias add writes
into the matrix product). Training gives bitwise the same numbers; a kernel touching a
stand-in's data fails naming the op and the variable; fetched values keep their data."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd import profiler
from spmd.errors import ExecutionError
from spmd.executor.stand_in import NoNeedBufferError, ShapeOnly
from spmd.kernels.registry import kernel
from spmd.ops.registry import OP_DEFS, define_op, get_op_def

L = fluid.layers
PLACE = fluid.CPUPlace()

# two test ops: "nnb_probe" (Out = X + 1) whose grad declares X no-need-buffer and records
# what it was given for X; "nnb_touch", whose grad declares the same but reads X's data
SEEN: list = []


def _define_test_ops():
    if OP_DEFS.registered("nnb_probe"):
        return

    def infer(ctx):
        x = ctx.input("X")
        ctx.set_output("Out", x.shape, x.dtype)

    for t in ("nnb_probe", "nnb_touch"):
        define_op(t, inputs=["X"], outputs=["Out"], grad_uses=("X",),
                  grad_no_need_buffer=("X",))(infer)

    @kernel("nnb_probe", "nnb_touch")
    def forward(xp, ins, attrs, want):
        return {"Out": ins["X"] + 1}

    @kernel("nnb_probe_grad")
    def probe_grad(xp, ins, attrs, want):
        SEEN.append(ins["X"])
        return {"X@GRAD": xp.ones(ins["X"].shape, ins["X"].dtype) * ins["Out@GRAD"]}

    @kernel("nnb_touch_grad")
    def touch_grad(xp, ins, attrs, want):
        return {"X@GRAD": ins["X"] * ins["Out@GRAD"]}  # reads the data it declared it does not


_define_test_ops()


def _append(block, type_, x):
    out = block.create_var(name=fluid.unique_name.generate(type_), shape=x.shape,
                           dtype=x.dtype)
    block.append_op(type=type_, inputs={"X": [x]}, outputs={"Out": [out]})
    return out


def _probe_program(type_, fetch_hidden=False):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 2
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 8], "float32")
        h = L.fc(x, 8)  # h: written here, read by the probe (data) and its grad (shape)
        loss = L.mean(L.scale(_append(main.global_block(), type_, h), scale=2.0))
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss, h


def _run(main, startup, fetch, feed, threads=1, steps=1, inplace=True):
    scope, exe = fluid.Scope(), fluid.Executor(PLACE)
    exe.run(startup, scope=scope)
    bs = fluid.BuildStrategy()
    bs.enable_inplace = inplace
    es = fluid.ExecutionStrategy()
    es.num_threads = threads
    program = fluid.CompiledProgram(main, build_strategy=bs).with_data_parallel(
        loss_name=fetch[0].name, exec_strategy=es, places=[PLACE])
    outs = [exe.run(program, feed=feed, fetch_list=fetch, scope=scope) for _ in range(steps)]
    plan = exe.plan_cache.find(program.data_parallel_program, list(feed),
                               [v.name for v in fetch], 0)
    report = plan.memory_report()
    params = {p.name: np.array(scope.find_var(p.name).get_tensor()).tobytes()
              for p in main.all_parameters()}
    exe.close()
    return outs, report, params


FEED = {"x": np.random.default_rng(0).standard_normal((4, 8)).astype("float32")}


def test_op_definitions_declare_fluids_no_need_buffer_slots():
    assert get_op_def("elementwise_add_grad").no_need_buffer == {"X", "Y"}
    assert get_op_def("elementwise_sub_grad").no_need_buffer == {"X", "Y"}
    assert get_op_def("mean_grad").no_need_buffer == {"X"}
    assert get_op_def("mul_grad").no_need_buffer == {"Out"}
    assert get_op_def("elementwise_mul_grad").no_need_buffer == frozenset()  # reads X and Y


def test_grad_no_need_buffer_must_name_a_grad_input():
    with pytest.raises(ValueError, match="not among its inputs"):
        define_op("nnb_bad", inputs=["X"], outputs=["Out"], grad_uses=(),
                  grad_no_need_buffer=("X",))(lambda ctx: None)


def test_stand_in_replaces_the_value_after_its_last_data_read():
    main, startup, loss, _ = _probe_program("nnb_probe")
    SEEN.clear()
    (out,), report, _ = _run(main, startup, [loss], FEED)
    assert len(SEEN) == 1 and isinstance(SEEN[0], ShapeOnly)
    assert SEEN[0].shape == (4, 8) and SEEN[0].dtype == np.float32
    assert (SEEN[0].ndim, SEEN[0].size) == (2, 32)
    # the fc's product (read by mul_grad for nothing, by the add's grad for its shape), the
    # fc's output (the probe's X), the mean's input
    assert report.stand_ins == 3
    assert np.isfinite(out[0]).all()


def test_a_fetched_value_keeps_its_data():
    main, startup, loss, h = _probe_program("nnb_probe")
    SEEN.clear()
    (outs,), report, _ = _run(main, startup, [loss, h], FEED)
    assert type(SEEN[0]) is np.ndarray  # the grad was given the array itself
    assert report.stand_ins == 2
    w = None
    scope, exe = fluid.Scope(), fluid.Executor(PLACE)
    exe.run(startup, scope=scope)
    w = np.array(scope.find_var("fc_0.w_0").get_tensor())
    b = np.array(scope.find_var("fc_0.b_0").get_tensor())
    np.testing.assert_array_equal(np.asarray(outs[1]), FEED["x"] @ w + b)


def test_a_kernel_touching_a_stand_ins_data_fails_naming_op_and_variable():
    main, startup, loss, h = _probe_program("nnb_touch")
    with pytest.raises(ExecutionError) as info:
        _run(main, startup, [loss], FEED)
    message = str(info.value)
    assert "nnb_touch_grad" in message and f"'{h.name}'" in message
    assert "no-need-buffer" in message
    assert isinstance(info.value.__cause__, NoNeedBufferError)


def test_a_stand_in_answers_shape_questions_only():
    s = ShapeOnly.of(np.zeros((3, 5), "float64"), "v")
    assert (s.shape, s.ndim, s.size, len(s), s.nbytes) == ((3, 5), 2, 15, 3, 120)
    assert ShapeOnly.of(s, "v") is s
    for touch in (lambda: np.asarray(s), lambda: s + 1, lambda: s.sum(), lambda: s[0],
                  lambda: np.add(s, 1), lambda: s.reshape(15)):
        with pytest.raises(NoNeedBufferError, match="'v'"):
            touch()


def _fc_program():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 4
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 64], "float32")
        h = L.fc(x, 256, act="relu")
        h = L.fc(h, 256)
        d = L.elementwise_sub(h, L.fc(x, 256))
        loss = L.mean(L.reduce_sum(d * d, dim=[1]))
        fluid.optimizer.SGD(0.01).minimize(loss)
    return main, startup, loss


FC_FEED = {"x": np.random.default_rng(1).standard_normal((64, 64)).astype("float32")}


def test_the_fc_bias_add_writes_into_the_dying_product():
    main, startup, loss = _fc_program()
    outs, report, params = _run(main, startup, [loss], FC_FEED, steps=3)
    off_outs, off_report, off_params = _run(main, startup, [loss], FC_FEED, steps=3,
                                            inplace=False)
    assert [o[0].tobytes() for o in outs] == [o[0].tobytes() for o in off_outs]
    assert params == off_params
    # the three fc products ([64, 256]: 64 KiB) die at their bias adds, which write into them
    assert report.reused_last_run >= 3
    assert report.stand_ins >= 3 and off_report.stand_ins == report.stand_ins


def test_two_threads_train_bitwise_as_one():
    main, startup, loss = _fc_program()
    one, one_report, one_params = _run(main, startup, [loss], FC_FEED, steps=3)
    two, two_report, two_params = _run(main, startup, [loss], FC_FEED, threads=2, steps=3)
    assert [o[0].tobytes() for o in one] == [o[0].tobytes() for o in two]
    assert one_params == two_params
    assert two_report.stand_ins == one_report.stand_ins > 0


def test_the_profiled_run_gives_the_same_numbers():
    main, startup, loss = _fc_program()
    plain, _, plain_params = _run(main, startup, [loss], FC_FEED, steps=2)
    with profiler.profiler("CPU", profile_path="/dev/null"):
        profiled, _, profiled_params = _run(main, startup, [loss], FC_FEED, steps=2)
    assert [o[0].tobytes() for o in plain] == [o[0].tobytes() for o in profiled]
    assert plain_params == profiled_params
