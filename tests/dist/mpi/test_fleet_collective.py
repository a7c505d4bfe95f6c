"""fleet's collective mode under mpiexec: PaddleCloudRoleMaker takes its role from MPI (or the
PADDLE_* variables), and fluid 1.x's fleet and 2.x's paddle.distributed.fleet train to the
same parameters as CompiledProgram.with_data_parallel on the same shards, on every rank."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import batches, build, params, shard

import spmd as paddle
import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.fluid.incubate.fleet.base import role_maker
from spmd.fluid.incubate.fleet.collective import DistributedStrategy, fleet

pytestmark = pytest.mark.mpi(min_size=1)
STEPS = 3


def train(program, startup, loss, main):
    t = detect()
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for x, y in batches("float64", STEPS):
        exe.run(program, feed={"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)},
                fetch_list=[loss], scope=scope)
    return params(scope, main)


def compiled_path():
    main, startup, loss = build("mlp", "momentum", "float64")
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    return train(compiled, startup, loss, main)


def fleet_program(distributed_optimizer):
    """build()'s model, with the optimizer wrapped by the fleet before minimize."""
    import dp_models

    original = dp_models.optimizer
    dp_models.optimizer = lambda name: distributed_optimizer(original(name))
    try:
        return build("mlp", "momentum", "float64")
    finally:
        dp_models.optimizer = original


def test_role_comes_from_mpi():
    t = detect()
    role = role_maker.PaddleCloudRoleMaker(is_collective=True)
    fleet.init(role)
    assert (fleet.worker_index(), fleet.worker_num()) == (t.rank, t.size)
    assert fleet.is_first_worker() == (t.rank == 0)
    assert len(fleet.worker_endpoints()) == t.size
    assert (paddle.distributed.get_rank(), paddle.distributed.get_world_size()) == (t.rank,
                                                                                    t.size)


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
def test_fleet_v1_equals_compiled_program(mode):
    want = compiled_path()
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    strategy = DistributedStrategy()
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    main, startup, loss = fleet_program(
        lambda opt: fleet.distributed_optimizer(opt, strategy))
    got = train(fleet.main_program, startup, loss, main)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12)


def test_user_defined_role_maker_with_mpi_ranks():
    t = detect()
    want = compiled_path()
    endpoints = [f"127.0.0.1:{6170 + i}" for i in range(t.size)]
    fleet.init(role_maker.UserDefinedCollectiveRoleMaker(t.rank, endpoints))
    main, startup, loss = fleet_program(lambda opt: fleet.distributed_optimizer(opt))
    got = train(fleet.main_program, startup, loss, main)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12)


def test_paddle_distributed_fleet_runs_the_main_program():
    from spmd.distributed import fleet as fleet2

    want = compiled_path()
    fleet2.init(is_collective=True)
    main, startup, loss = fleet_program(
        lambda opt: fleet2.distributed_optimizer(opt, fleet2.DistributedStrategy()))
    got = train(main, startup, loss, main)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12)


def test_layers_collective_helpers_across_ranks():
    from spmd.fluid.layers import collective

    t = detect()
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.data("x", [2], "float64")
        total = collective._c_allreduce(x)
        legacy = collective._allreduce(x)
        root = collective._c_broadcast(fluid.layers.scale(x, 1.0), root=0)
    got = fluid.Executor().run(main, feed={"x": np.array([t.rank, 1.0])},
                               fetch_list=[total, legacy, root])
    want_sum = [t.size * (t.size - 1) / 2, t.size]
    np.testing.assert_array_equal(got[0], want_sum)
    np.testing.assert_array_equal(got[1], want_sum)
    np.testing.assert_array_equal(got[2], [0.0, 1.0])
