"""Executor: feed checking, failed runs, startup preconditions, the plan cache, fetching, scopes
and tensors."""
from __future__ import annotations

import numpy as np
import pytest

import spmd
import spmd.executor.job as job_module
import spmd.fluid as fluid
from spmd.core import CPUPlace, OpRole, Program, Scope, global_scope, scope_guard
from spmd.errors import (
    ExecutionError,
    FeedError,
    InvalidArgumentError,
    NotFoundError,
    PreconditionError,
)
from spmd.kernels.registry import KERNELS

RNG = np.random.default_rng(3)
W = RNG.standard_normal((3, 4)).astype("float32")


def programs():
    """(main, startup): out = scale(x @ w, 2), loss = mean(out), w -= lr * g after the forward;
    the startup program fills w and lr."""
    main, startup = Program(), Program()
    block = main.global_block()
    x = block.create_var(name="x", shape=(-1, 3), dtype="float32", is_data=True,
                         need_check_feed=True)  # checked, as fluid.data's
    w = block.create_parameter("w", (3, 4), "float32")
    block.create_var(name="lr", shape=(1,), dtype="float32", persistable=True)
    block.append_op("mul", {"X": x, "Y": w}, {"Out": "h"})
    block.append_op("scale", {"X": "h"}, {"Out": "out"}, {"scale": 2.0})
    block.append_op("mean", {"X": "out"}, {"Out": "loss"})
    sblock = startup.global_block()
    sblock.create_parameter("w", (3, 4), "float32")
    sblock.create_var(name="lr", shape=(1,), dtype="float32", persistable=True)
    sblock.append_op("fill_constant", {}, {"Out": "w"}, {"shape": [3, 4], "value": 0.5})
    sblock.append_op("fill_constant", {}, {"Out": "lr"}, {"shape": [1], "value": 0.1})
    return main, startup


def ready_scope(main) -> Scope:
    scope = Scope()
    scope.var("w").get_tensor().set(W)
    scope.var("lr").get_tensor().set(np.array([0.1], "float32"))
    return scope


def x_value(n=2):
    return RNG.standard_normal((n, 3)).astype("float32")


# -- bad feeds ---------------------------------------------------------------------------------
BAD_FEEDS = [
    ("shape", {"x": np.zeros((2, 4), "float32")}, [r"'x'", r"\[None, 3\]", r"\[2, 4\]"]),
    ("rank", {"x": np.zeros((2, 3, 1), "float32")}, [r"'x'", r"\[None, 3\]", r"\[2, 3, 1\]"]),
    ("dtype", {"x": np.zeros((2, 3), "float64")}, [r"'x'", "expected dtype float32",
                                                    "got float64", r"astype\('float32'\)"]),
    ("missing", {}, [r"\['x'\]", "must be fed"]),
    ("ragged", {"x": [[1.0, 2.0, 3.0], [1.0]]}, [r"'x'", "cannot convert to float32"]),
]


@pytest.mark.parametrize("feed,patterns", [(f, p) for _, f, p in BAD_FEEDS],
                         ids=[c[0] for c in BAD_FEEDS])
def test_bad_feed_is_a_feed_error_before_any_kernel(monkeypatch, feed, patterns):
    ran = []
    for op_type in ("mul", "scale", "mean"):
        real = KERNELS[op_type]
        monkeypatch.setitem(KERNELS, op_type,
                            lambda xp, ins, attrs, want, real=real: ran.append(1) or
                            real(xp, ins, attrs, want))
    main, _ = programs()
    scope = ready_scope(main)
    before = {n: scope.get(n) for n in ("w", "lr")}
    with pytest.raises(FeedError) as e:
        spmd.Executor().run(main, feed=feed, fetch_list=["loss"], scope=scope)
    for pattern in patterns:
        assert e.match(pattern)
    assert ran == []  # raised before any kernel ran, not from inside one
    assert not any("spmd/kernels" in str(entry.path) for entry in e.traceback)
    assert all(scope.get(n) is a for n, a in before.items())


def test_good_feeds_are_converted():
    main, _ = programs()
    scope = ready_scope(main)
    exe = spmd.Executor()
    x = x_value()
    (a,) = exe.run(main, feed={"x": x.tolist()}, fetch_list=["out"], scope=scope)
    (b,) = exe.run(main, feed={main.global_block().var("x"): x}, fetch_list=["out"],
                   scope=scope)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, 2 * x @ W, rtol=1e-6)


def test_a_feed_the_program_does_not_declare_is_ignored_with_a_warning():
    # fluid 1.8's Executor adds no feed op for such a name and warns (Paddle's
    # test_layer_norm_op feeds its pruned-away "scale" and "bias")
    main, _ = programs()
    scope = ready_scope(main)
    exe = spmd.Executor()
    x = np.random.default_rng(7).standard_normal((2, 3)).astype("float32")  # RNG's draws kept
    feed = {"x": x, "xx": np.zeros(1)}
    with pytest.warns(UserWarning, match=r"xx is not found in program.*did you mean \['x'\]"):
        (out,) = exe.run(main, feed=feed, fetch_list=["out"], scope=scope)
    np.testing.assert_allclose(out, 2 * x @ W, rtol=1e-6)
    assert sorted(feed) == ["x", "xx"]  # the caller's dict is left as it was
    assert scope.find_var("xx") is None
    with pytest.warns(UserWarning, match="xx is not found in program"):  # a one-place list
        (again,) = exe.run(main, feed=[{"x": x, "xx": 1}], fetch_list=["out"], scope=scope)
    np.testing.assert_array_equal(again, out)


# -- failed runs -------------------------------------------------------------------------------
def test_failed_run_leaves_the_scope_as_it_was():
    """sgd runs first, then an op fails: the updated parameter must not reach the scope."""
    prog = Program()
    block = prog.global_block()
    for name in ("a", "z"):
        block.create_var(name=name, shape=(-1, 3), dtype="float32", is_data=True)
    block.create_parameter("w", (3,), "float32")
    for name in ("g", "lr"):
        block.create_var(name=name, shape=(3,) if name == "g" else (1,), dtype="float32",
                         persistable=True)
    with prog.role_guard(OpRole.OPTIMIZE):
        block.append_op("sgd", {"Param": "w", "Grad": "g", "LearningRate": "lr"},
                        {"ParamOut": "w"})
    block.append_op("elementwise_add", {"X": "a", "Y": "z"}, {"Out": "s"})
    scope = Scope()
    values = {"w": np.arange(3, dtype="float32"), "g": np.ones(3, "float32"),
              "lr": np.array([0.5], "float32")}
    for name, value in values.items():
        scope.var(name).get_tensor().set(value)
    before = {n: (scope.get(n), scope.get(n).tobytes()) for n in values}
    exe = spmd.Executor()
    with pytest.raises(ExecutionError, match=r"op #1 'elementwise_add' failed"):
        exe.run(prog, feed={"a": np.zeros((2, 3), "float32"), "z": np.zeros((3, 3), "float32")},
                fetch_list=["s"], scope=scope)
    for name, (array, raw) in before.items():
        assert scope.get(name) is array and array.tobytes() == raw
    exe.run(prog, feed={"a": np.zeros((2, 3), "float32"), "z": np.zeros((2, 3), "float32")},
            fetch_list=["s"], scope=scope)
    np.testing.assert_array_equal(np.array(scope.find_var("w").get_tensor()), [-0.5, 0.5, 1.5])


def test_main_before_startup_names_the_parameter():
    main, startup = programs()
    scope = Scope()
    exe = spmd.Executor()
    with pytest.raises(PreconditionError, match=r"parameter 'w'.*startup program"):
        exe.run(main, feed={"x": x_value()}, fetch_list=["loss"], scope=scope)
    assert scope.local_var_names() == []
    exe.run(startup, scope=scope)
    (out,) = exe.run(main, feed={"x": x_value()}, fetch_list=["out"], scope=scope)
    assert out.shape == (2, 4)


# -- the plan cache ----------------------------------------------------------------------------
@pytest.fixture
def plan_count(monkeypatch):
    built = []

    class CountingPlan(job_module.Plan):
        def __init__(self, *args, **kwargs):
            built.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(job_module, "Plan", CountingPlan)
    return built


def test_plan_is_reused_across_runs(plan_count):
    main, _ = programs()
    scope = ready_scope(main)
    exe = spmd.Executor()
    for _ in range(3):
        exe.run(main, feed={"x": x_value()}, fetch_list=["out"], scope=scope)
    assert len(plan_count) == 1
    assert exe.plan_cache.find(main, ["x"], ["out"]) is plan_count[0]
    exe.run(main, feed={"x": x_value()}, fetch_list=["loss"], scope=scope)
    exe.run(main, feed={"x": x_value()}, fetch_list=["out"], scope=scope)
    assert len(plan_count) == 2  # one more fetch list, one more plan; the first still cached


def test_plan_is_rebuilt_when_the_program_changes(plan_count):
    main, _ = programs()
    scope = ready_scope(main)
    exe = spmd.Executor()
    x = x_value()
    (before,) = exe.run(main, feed={"x": x}, fetch_list=["out"], scope=scope)
    main.global_block().ops[1].set_attr("scale", 3.0)
    (after,) = exe.run(main, feed={"x": x}, fetch_list=["out"], scope=scope)
    np.testing.assert_allclose(after, before * 1.5, rtol=1e-6)
    main.global_block().append_op("relu", {"X": "out"}, {"Out": "r"})
    (r,) = exe.run(main, feed={"x": x}, fetch_list=["out"], scope=scope)
    assert len(plan_count) == 3
    assert len(exe.plan_cache) == 1  # stale versions are replaced, not accumulated
    main.random_seed = 5
    exe.run(main, feed={"x": x}, fetch_list=["out"], scope=scope)
    assert len(plan_count) == 4  # a new seed needs a new generator


def test_equal_programs_never_share_a_plan():
    exe = spmd.Executor()
    for scale in (2.0, 3.0, 4.0):  # each program is freed before the next is built
        main, _ = programs()
        main.global_block().ops[1].set_attr("scale", scale)
        x = x_value()
        (out,) = exe.run(main, feed={"x": x}, fetch_list=["out"], scope=ready_scope(main))
        np.testing.assert_allclose(out, scale * x @ W, rtol=1e-6)


# -- fetching ----------------------------------------------------------------------------------
def test_fetch_by_variable_or_name():
    main, _ = programs()
    scope = ready_scope(main)
    exe = spmd.Executor()
    x = x_value()
    by_var = exe.run(main, feed={"x": x}, fetch_list=[main.global_block().var("out"), "loss"],
                     scope=scope)
    by_name = exe.run(main, feed={"x": x}, fetch_list=["out", main.global_block().var("loss")],
                      scope=scope)
    for a, b in zip(by_var, by_name):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(by_var[1], [np.mean(2 * x @ W)], rtol=1e-6)
    with pytest.raises(NotFoundError, match=r"'lost'.*did you mean \['loss'\]"):
        exe.run(main, feed={"x": x}, fetch_list=["lost"], scope=scope)
    with pytest.raises(InvalidArgumentError, match="fetch_list items"):
        exe.run(main, feed={"x": x}, fetch_list=[3], scope=scope)


def test_return_numpy_false():
    main, _ = programs()
    scope = ready_scope(main)
    x = x_value()
    (t,) = spmd.Executor().run(main, feed={"x": x}, fetch_list=["out"], scope=scope,
                               return_numpy=False)
    assert not isinstance(t, np.ndarray)
    assert t.shape() == [2, 4] and t.lod() == []
    np.testing.assert_allclose(np.array(t), 2 * x @ W, rtol=1e-6)
    assert np.array(t, dtype="float64").dtype == np.float64


def test_fetched_values_never_alias_the_scope():
    main, _ = programs()
    scope = ready_scope(main)
    (w,) = spmd.Executor().run(main, feed={"x": x_value()}, fetch_list=["w"], scope=scope)
    w += 100
    np.testing.assert_array_equal(np.array(scope.find_var("w").get_tensor()), W)


# -- scopes and tensors ------------------------------------------------------------------------
def test_scope_guard_and_global_scope():
    _, startup = programs()
    outer = global_scope()
    inner = Scope()
    with scope_guard(inner):
        assert global_scope() is inner
        spmd.Executor().run(startup)  # no scope given: the global one, i.e. `inner`
    assert global_scope() is outer
    np.testing.assert_array_equal(np.array(inner.find_var("w").get_tensor()),
                                  np.full((3, 4), 0.5, "float32"))
    assert outer.find_var("w") is None or outer.get("w") is not inner.get("w")


def test_tensor_set_find_var_and_numpy():
    main, _ = programs()
    scope = Scope()
    scope.var("w").get_tensor().set(W, CPUPlace())
    scope.var("lr").get_tensor().set([0.1])
    tensor = scope.find_var("w").get_tensor()
    assert tensor.shape() == [3, 4] and scope.find_var("w").is_initialized()
    copy = np.array(tensor)
    np.testing.assert_array_equal(copy, W)
    copy[0, 0] = 42.0  # np.array gives a copy: the scope keeps its value
    np.testing.assert_array_equal(np.array(scope.find_var("w").get_tensor()), W)
    assert scope.find_var("nope") is None
    with pytest.raises(InvalidArgumentError, match="'v' holds no value"):
        np.array(scope.var("v").get_tensor())
    x = x_value()
    (out,) = spmd.Executor().run(main, feed={"x": x}, fetch_list=["out"], scope=scope)
    np.testing.assert_allclose(out, 2 * x @ W, rtol=1e-6)


def test_run_in_a_kid_scope_updates_the_parent_parameter():
    prog = Program()
    block = prog.global_block()
    block.create_parameter("w", (3,), "float32")
    for name, shape in (("g", (3,)), ("lr", (1,))):
        block.create_var(name=name, shape=shape, dtype="float32", persistable=True)
    block.append_op("sgd", {"Param": "w", "Grad": "g", "LearningRate": "lr"},
                    {"ParamOut": "w"})
    parent = Scope()
    parent.var("w").get_tensor().set(np.zeros(3, "float32"))
    parent.var("g").get_tensor().set(np.ones(3, "float32"))
    parent.var("lr").get_tensor().set(np.array([1.0], "float32"))
    kid = parent.new_scope()
    spmd.Executor().run(prog, scope=kid)
    np.testing.assert_array_equal(np.array(parent.find_var("w").get_tensor()), [-1, -1, -1])
    assert kid.local_var_names() == []


def test_closed_executor_refuses_to_run():
    exe = spmd.Executor()
    exe.close()
    with pytest.raises(PreconditionError, match="closed"):
        exe.run(Program())
    with pytest.raises(InvalidArgumentError, match="place"):
        spmd.Executor("cpu")


def test_a_gpu_place_without_cupy_says_how_to_run_on_the_cpu():
    """fluid's CPU build refuses CUDAPlace; spmd says so at the first run on it, naming the
    two ways out (install the CUDA extra, or use CPUPlace), instead of a bare ImportError."""
    try:
        import cupy  # noqa: F401
        pytest.skip("cupy imports here: a GPU place can run")
    except ImportError:
        pass
    import spmd.fluid as fluid

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        fluid.layers.fc(fluid.data("x", [-1, 2], "float32"), 1)
    exe = fluid.Executor(fluid.CUDAPlace(0))
    with pytest.raises(PreconditionError, match=r"CUDAPlace\(0\) needs cupy.*spmd\[cuda12\]"
                                                r".*fluid\.CPUPlace\(\)"):
        exe.run(startup, scope=Scope())


@pytest.mark.parametrize("compiled", [False, True])
def test_a_fed_persistable_stays_in_the_scope_and_an_op_updating_it_in_place_wins(compiled):
    """fluid's feed op writes the fed value into the scope before the ops run (Paddle's
    test_add_reader_dependency): runs without the feed continue from the op's update."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        counter = fluid.data("counter", [1], "float32")
        counter.persistable = True
        main.global_block().append_op("scale", {"X": [counter]}, {"Out": [counter]},
                                      {"bias": 1.0})
        kept = fluid.data("kept", [1], "float32")
        kept.persistable = True
        out = fluid.layers.scale(kept, 2.0)
    program = fluid.CompiledProgram(main) if compiled else main
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    got = []
    for step in range(3):
        feed = {"counter": np.array([-1], "float32"), "kept": np.array([3], "float32")}
        got.append(float(exe.run(program, feed=feed if step == 0 else None,
                                 fetch_list=[counter, out], scope=scope)[0][0]))
    assert got == [0.0, 1.0, 2.0]
    assert np.array(scope.find_var("kept").get_tensor()).tolist() == [3.0]
