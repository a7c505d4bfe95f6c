"""Data-parallel behaviours real fluid programs rely on: fluid 1.8's BuildStrategy and
ExecutionStrategy fields and defaults, warn-once for fields spmd does not act on (every field's
decision: test_pass_registry.py), trainers_endpoints checked, a test clone
compiled with the training loss's name, a fed persistable variable copied to every place,
`dry_run` (fluid's `_dry_run`) and `num_iteration_per_run`."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError
from spmd.executor.feed import split_feed
from spmd.passes.strategy import check_endpoints, forget_warnings, warn_unacted
from tests.oracle_io import load

PLACES = [fluid.CPUPlace()] * 2


def build(lr_fed: bool = False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        y = fluid.data("y", [None, 1], "float32")
        pred = fluid.layers.fc(x, 1, param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Constant(0.5)))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        test = main.clone(for_test=True)
        if lr_fed:
            lr = fluid.layers.create_global_var([1], 0.1, "float32", persistable=True,
                                                name="lr")
        else:
            lr = 0.1
        fluid.optimizer.SGD(lr).minimize(loss)
    return main, startup, test, loss


def feed(n: int = 4):
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((n, 4)).astype("float32"),
            "y": rng.standard_normal((n, 1)).astype("float32")}


def weight(scope):
    return np.array(scope.find_var("fc_0.w_0").get_tensor())


def run_steps(compiled, startup, feeds, fetch):
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    out = [exe.run(compiled, feed=f, fetch_list=fetch, scope=scope) for f in feeds]
    return scope, out


def test_every_fluid_field_is_accepted_with_fluid_defaults():
    defaults = load("misc")["strategy_defaults"]
    bs, es = fluid.BuildStrategy(), fluid.ExecutionStrategy()
    for kind, obj in (("BuildStrategy", bs), ("ExecutionStrategy", es)):
        for name, value in defaults[kind].items():
            got = getattr(obj, name)
            got = int(got) if hasattr(got, "value") else got
            got = sorted(got) if isinstance(got, set) else got
            assert got == value, (kind, name)
            setattr(obj, name, getattr(obj, name))  # settable


def test_unacted_field_warns_once_naming_it():
    forget_warnings()
    bs = fluid.BuildStrategy()
    bs.fuse_relu_depthwise_conv = True
    with pytest.warns(UserWarning,
                      match="fuse_relu_depthwise_conv=True is accepted but not acted on"):
        assert warn_unacted(bs) == ["fuse_relu_depthwise_conv"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_unacted(bs) == []  # once per process
        assert warn_unacted(fluid.BuildStrategy()) == []  # defaults never warn


def test_fields_nothing_reads_warn_naming_what_spmd_does_instead():
    """cache_runtime_context (fluid 1.8: a RuntimeContext cache): no spmd code reads it, so a
    set value warns; enable_sequential_execution acts (tests/unit/test_ssa_executor.py), so it
    does not."""
    forget_warnings()
    bs = fluid.BuildStrategy()
    bs.enable_sequential_execution = bs.cache_runtime_context = True
    with pytest.warns(UserWarning) as caught:
        assert warn_unacted(bs) == ["cache_runtime_context"]
    text = "\n".join(str(w.message) for w in caught)
    assert "cache_runtime_context=True is accepted but not acted on" in text
    assert "enable_sequential_execution" not in text


def test_trainers_endpoints_are_checked_against_num_trainers_and_trainer_id():
    bs = fluid.BuildStrategy()
    bs.num_trainers, bs.trainer_id = 2, 1
    bs.trainers_endpoints = ["127.0.0.1:6170", "127.0.0.1:6171"]
    check_endpoints(bs)  # as fleet's collective mode sets them
    bs.trainers_endpoints = ["127.0.0.1:6170"]
    with pytest.raises(InvalidArgumentError, match=r"1 endpoint\(s\).*num_trainers=2"):
        check_endpoints(bs)
    bs.num_trainers = 1
    with pytest.raises(InvalidArgumentError, match=r"trainer_id=1 is not an index"):
        check_endpoints(bs)
    main, startup, _, loss = build()
    dp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name, build_strategy=bs,
                                                        places=PLACES)
    with pytest.raises(InvalidArgumentError, match="trainer_id=1 is not an index"):
        run_steps(dp, startup, [feed()], [loss])


def test_test_clone_with_loss_name_and_share_vars_from_runs():
    main, startup, test, loss = build()
    train = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                           places=PLACES)
    test_c = fluid.CompiledProgram(test).with_data_parallel(
        loss_name=loss.name, share_vars_from=train, places=PLACES)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    f = feed()
    exe.run(train, feed=f, scope=scope)
    w = weight(scope)
    (got,) = exe.run(test_c, feed=f, fetch_list=[loss.name], scope=scope)
    want = ((f["x"] @ w + np.array(scope.find_var("fc_0.b_0").get_tensor()) - f["y"]) ** 2)
    np.testing.assert_allclose(got.mean(), want.mean(), rtol=1e-5)
    np.testing.assert_array_equal(weight(scope), w)  # forward only


def test_fed_persistable_learning_rate_is_copied_to_every_place():
    shards = split_feed({"lr": np.ones(1), "x": np.zeros((4, 2))}, 2, replicated={"lr"})
    assert [s["lr"].shape for s in shards] == [(1,), (1,)]
    assert [s["x"].shape for s in shards] == [(2, 2), (2, 2)]
    main, startup, _, loss = build(lr_fed=True)
    f = feed()
    lr = np.array([0.05], "float32")
    ref_scope, _ = run_steps(main, startup, [dict(f, lr=lr)], [loss])
    dp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name, places=PLACES)
    dp_scope, _ = run_steps(dp, startup, [dict(f, lr=lr)], [loss])
    np.testing.assert_allclose(weight(dp_scope), weight(ref_scope), rtol=1e-5)
    assert not np.allclose(weight(dp_scope), 0.5)


def test_dry_run_changes_nothing_and_fetches_none():
    main, startup, _, loss = build()
    es = fluid.ExecutionStrategy()
    es.dry_run = True  # fluid's _dry_run, under its public name
    assert es.dry_run
    dp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name, exec_strategy=es,
                                                        places=PLACES)
    scope, out = run_steps(dp, startup, [feed()], [loss])
    assert out == [[None]]
    np.testing.assert_array_equal(weight(scope), np.full((4, 1), 0.5, "float32"))


def test_num_iteration_per_run_runs_one_step_as_fluid_does():
    """fluid 1.8.5's default executor runs one step per exe.run whatever
    num_iteration_per_run says (measured: a counter summing the feed grows by one feed per
    run); spmd does the same and warns that the field changes nothing."""
    main, startup, _, loss = build()
    es = fluid.ExecutionStrategy()
    es.num_iteration_per_run = 3
    es.num_iteration_per_drop_scope = 1
    es.use_experimental_executor = False
    dp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name, exec_strategy=es,
                                                        places=PLACES)
    forget_warnings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scope, _ = run_steps(dp, startup, [feed()], [loss])
    said = " ".join(str(w.message) for w in caught)
    for name in ("num_iteration_per_drop_scope", "use_experimental_executor",
                 "num_iteration_per_run"):
        assert f"ExecutionStrategy.{name}=" in said
    ref, _ = run_steps(main, startup, [feed()], [loss])
    np.testing.assert_allclose(weight(scope), weight(ref), rtol=1e-5)
