"""fleet's collective mode in one process: fluid 1.x's `incubate.fleet.collective` and 2.x's
`paddle.distributed.fleet` train exactly as CompiledProgram.with_data_parallel does; role
makers, strategy checks, saving. (tests/dist/mpi/test_fleet_collective.py runs it on 1-4
ranks.)"""
from __future__ import annotations

import numpy as np
import pytest

import spmd as paddle
import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError, PreconditionError
from spmd.fluid.incubate.fleet.base import role_maker
from spmd.fluid.incubate.fleet.collective import DistributedStrategy, fleet

STEPS = 3


def build():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 5], "float64")
        y = fluid.data("y", [None, 1], "float64")
        pred = fluid.layers.fc(fluid.layers.fc(x, 8, act="tanh"), 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
    return main, startup, loss


def data():
    rng = np.random.default_rng(1)
    return [{"x": rng.standard_normal((4, 5)), "y": rng.standard_normal((4, 1))}
            for _ in range(STEPS)]


def train(program, startup, loss):
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    losses = [exe.run(program, feed=f, fetch_list=[loss], scope=scope)[0] for f in data()]
    return scope, exe, losses


def params(scope, program):
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in program.all_parameters()}


def reference():
    main, startup, loss = build()
    with fluid.program_guard(main, startup):
        fluid.optimizer.Momentum(0.1, 0.9).minimize(loss)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    scope, _, losses = train(compiled, startup, loss)
    return params(scope, main), losses


def fleet_v1(strategy=None, role=None):
    fleet.init(role or role_maker.PaddleCloudRoleMaker(is_collective=True))
    main, startup, loss = build()
    with fluid.program_guard(main, startup):
        opt = fleet.distributed_optimizer(fluid.optimizer.Momentum(0.1, 0.9), strategy)
        opt.minimize(loss)
    return main, startup, loss


def test_fleet_v1_equals_compiled_program_path(tmp_path):
    want, want_losses = reference()
    main, startup, loss = fleet_v1(DistributedStrategy())
    assert isinstance(fleet.main_program, fluid.CompiledProgram)
    assert fleet.startup_program is startup
    scope, exe, losses = train(fleet.main_program, startup, loss)
    for name, value in params(scope, main).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-12)
    np.testing.assert_allclose(np.ravel(losses), np.ravel(want_losses), rtol=1e-12)
    assert (fleet.worker_index(), fleet.worker_num(), fleet.is_first_worker()) == (0, 1, True)
    assert len(fleet.worker_endpoints()) == 1
    with fluid.scope_guard(scope):
        fleet.save_persistables(exe, str(tmp_path / "ckpt"))
        fleet.save_inference_model(exe, str(tmp_path / "infer"), ["x", "y"],
                                   [main.global_block().var(loss.name)])
    assert (tmp_path / "ckpt").is_dir() and (tmp_path / "infer").is_dir()


def test_fleet_v1_collective_mode_runs_the_main_program_data_parallel(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")  # two places: a data-parallel run fetches a loss each
    want, _ = reference()
    strategy = DistributedStrategy()
    strategy.mode = "collective"
    strategy.collective_mode = "grad_allreduce"
    main, startup, loss = fleet_v1(strategy)
    assert fleet.main_program is main  # as fluid 1.8: the Program, so it clones for test
    assert fleet.main_program.clone(for_test=True).global_block().ops
    scope, _, losses = train(main, startup, loss)
    assert all(np.shape(step) == (2,) for step in losses), losses  # ran on both places
    for name, value in params(scope, main).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-12)


def test_distributed_strategy_fields_and_refusals():
    s = DistributedStrategy()
    assert (s.mode, s.collective_mode, s.use_amp, s.amp_loss_scaling) == ("nccl2", None,
                                                                          False, 2.0 ** 15)
    assert isinstance(s.exec_strategy, fluid.ExecutionStrategy)
    assert isinstance(s, fluid.BuildStrategy)
    with pytest.raises(InvalidArgumentError, match="no field 'use_locl_sgd'"):
        s.use_locl_sgd = True
    s.use_local_sgd = True
    with pytest.raises(InvalidArgumentError, match="local SGD"):
        fleet_v1(s)
    s = DistributedStrategy()
    s.forward_recompute = True
    with pytest.raises(InvalidArgumentError, match="recompute_checkpoints"):
        fleet_v1(s)
    s.recompute_checkpoints = ["fc_0.tmp_0"]
    s.use_amp = True
    with pytest.warns(UserWarning, match="use_amp is accepted but not acted on"), \
            pytest.warns(UserWarning, match="forward_recompute is accepted but not acted on"):
        fleet_v1(s)


def test_role_makers(monkeypatch):
    # SPMD_ENV_START=0: two trainers declared in a plain process would otherwise re-execute it
    # (pytest itself) to join them, as env-only trainers do (docs/env_only_start.md)
    monkeypatch.setenv("SPMD_ENV_START", "0")
    role = role_maker.UserDefinedCollectiveRoleMaker(1, ["a:1", "b:2"])
    assert (role.worker_index(), role.worker_num(), role.is_first_worker()) == (1, 2, False)
    with pytest.raises(InvalidArgumentError, match="duplicates"):
        role_maker.UserDefinedCollectiveRoleMaker(0, ["a:1", "a:1"])
    with pytest.raises(InvalidArgumentError, match=r"current_id=2 must be in \[0, 1\]"):
        role_maker.UserDefinedCollectiveRoleMaker(2, ["a:1", "b:2"])
    with pytest.raises(InvalidArgumentError, match="parameter-server"):
        role_maker.PaddleCloudRoleMaker(is_collective=False).generate_role()
    with pytest.raises(InvalidArgumentError, match="expects a role maker"):
        fleet.init("worker")
    # two workers declared, one process running: refused before any step
    with pytest.raises(InvalidArgumentError, match="2 trainer endpoint"):
        fleet_v1(role=role_maker.UserDefinedCollectiveRoleMaker(0, ["a:1", "b:2"]))


def test_paddle_distributed_fleet_static(monkeypatch):
    from spmd.distributed import fleet as fleet2

    monkeypatch.setenv("CPU_NUM", "2")  # two places: a data-parallel run fetches a loss each
    want, _ = reference()
    fleet2.init(is_collective=True)
    assert (fleet2.worker_index(), fleet2.worker_num()) == (0, 1)
    assert (paddle.distributed.get_rank(), paddle.distributed.get_world_size()) == (0, 1)
    strategy = fleet2.DistributedStrategy()
    strategy.fuse_all_reduce_ops = False
    with pytest.raises(InvalidArgumentError, match="no field 'fuse_allreduce'"):
        strategy.fuse_allreduce = True
    main, startup, loss = build()
    with fluid.program_guard(main, startup):
        opt = fleet2.distributed_optimizer(fluid.optimizer.Momentum(0.1, 0.9), strategy)
        opt.minimize(loss)
    assert isinstance(fleet2.main_program, fluid.CompiledProgram)
    scope, _, losses = train(main, startup, loss)  # the main program itself: data parallel
    assert all(np.shape(step) == (2,) for step in losses), losses  # ran on both places
    for name, value in params(scope, main).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-12)
    strategy.lamb = True
    with pytest.raises(InvalidArgumentError, match="lamb=True is not available"):
        fleet2.distributed_optimizer(fluid.optimizer.SGD(0.1), strategy).minimize(build()[2])


def test_collective_optimizer_checks_as_fluid_before_the_loss():
    """fluid 1.8: recompute_checkpoints must be a list (checked when the optimizer is made);
    minimize first refuses forward_recompute without checkpoints, or a switch given an
    optimizer already wrapped its way, all ValueErrors, before it looks at the loss."""
    from spmd.fluid.incubate.fleet.collective import CollectiveOptimizer

    adam = fluid.optimizer.AdamOptimizer()
    CollectiveOptimizer(adam, strategy=None)
    s = DistributedStrategy()
    s.forward_recompute, s.recompute_checkpoints = True, "NoneListTest"
    with pytest.raises(ValueError, match="must be a list"):
        CollectiveOptimizer(adam, s)
    s.recompute_checkpoints = []
    with pytest.raises(ValueError, match="needs recompute_checkpoints"):
        CollectiveOptimizer(adam, s).minimize(None)
    s.recompute_checkpoints = ["x"]
    with pytest.raises(ValueError, match="cannot take a RecomputeOptimizer"):
        CollectiveOptimizer(fluid.optimizer.RecomputeOptimizer(adam), s).minimize(None)
    amp = DistributedStrategy()
    amp.use_amp = True
    mixed = fluid.contrib.mixed_precision.decorate(adam, init_loss_scaling=1.0,
                                                   use_dynamic_loss_scaling=True)
    with pytest.raises(ValueError, match="cannot take a OptimizerWithMixedPrecision"):
        CollectiveOptimizer(mixed, amp).minimize(None)


def test_fleet_needs_init_before_minimize():
    from spmd.fleet import Collective

    fresh = Collective()
    main, startup, loss = build()
    with pytest.raises(PreconditionError, match=r"call fleet.init\(role\) first"), \
            fluid.program_guard(main, startup):
        fresh.distributed_optimizer(fluid.optimizer.SGD(0.1)).minimize(loss)
