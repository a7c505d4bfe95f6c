"""fleet's checkpoints and all_reduce_worker under mpiexec (1-4 ranks): a job resumed from
fleet.save_check_point ends where the uninterrupted job ends, in AllReduce mode (rank 0 saves,
as fluid's scripts do) and in Reduce mode (every rank saves: the save gathers the split
optimizer state); ranks saving into one directory at once take distinct numbers; all_reduce_worker
reduces across the ranks, with values computed from rank and size."""
from __future__ import annotations

import os

import numpy as np
import pytest
from dp_models import batches, shard
from test_fleet_collective import fleet_program

import spmd.fluid as fluid
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect
from spmd.errors import InvalidArgumentError
from spmd.fluid.incubate.fleet.base import role_maker
from spmd.fluid.incubate.fleet.collective import DistributedStrategy, TrainStatus, fleet

pytestmark = pytest.mark.mpi(min_size=1)
EPOCHS, SAVED_AFTER = 4, 1
PREFIX = "__paddle_fleet_checkpoint__"


def fleet_model(mode: str):
    """dp_models' MLP with Adam, wrapped by fleet in `mode`: (main, startup, fleet program)."""
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    strategy = DistributedStrategy()
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    import dp_models

    original = dp_models.optimizer
    dp_models.optimizer = lambda name: original("adam")
    try:
        main, startup, _ = fleet_program(lambda opt: fleet.distributed_optimizer(opt, strategy))
    finally:
        dp_models.optimizer = original
    return main, startup, fleet.main_program


def run_epochs(program, scope, exe, epochs):
    t, data = detect(), batches("float64", EPOCHS)
    for epoch in epochs:  # an "epoch" here is one global batch
        x, y = data[epoch]
        exe.run(program, feed={"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)},
                scope=scope)


def persistables(scope, main, mode: str = "AllReduce") -> dict:
    """Every persistable; in Reduce mode the parameters (a rank holds only its share of the
    optimizer state; the parameters after further steps show that all of it was restored)."""
    chosen = (fluid.io.get_program_parameter(main) if mode == "Reduce"
              else fluid.io.get_program_persistable_vars(main))
    return {v.name: np.array(scope.find_var(v.name).get_tensor()) for v in chosen}


def same_on_every_rank(values: dict):
    comm = MPICommunicator()
    for name in sorted(values):
        flat = np.ascontiguousarray(values[name], dtype=np.float64).ravel()
        every = comm.allgather(flat)
        for r in range(comm.size):
            np.testing.assert_array_equal(every[r], flat, err_msg=f"{name} on rank {r}")


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
def test_resume_equals_uninterrupted(mpi_tmp_path, mode):
    t, exe = detect(), fluid.Executor(fluid.CPUPlace())
    main, startup, program = fleet_model(mode)
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    run_epochs(program, scope, exe, range(EPOCHS))
    want = persistables(scope, main, mode)

    # Reduce mode: the save gathers the split state, so every rank saves, each its own copy
    root = str(mpi_tmp_path / (f"reduce_{t.rank}" if mode == "Reduce" else "allreduce"))
    main, startup, program = fleet_model(mode)
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    run_epochs(program, scope, exe, range(SAVED_AFTER + 1))
    if mode == "Reduce" or fleet.worker_index() == 0:
        with fluid.scope_guard(scope):
            fleet.save_check_point(exe, root, TrainStatus(SAVED_AFTER))
    fleet.barrier_worker()

    main, startup, program = fleet_model(mode)  # a new job
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    with fluid.scope_guard(scope):
        status = fleet.load_check_point(exe, root, fleet.worker_index())
    assert status == TrainStatus(SAVED_AFTER)
    run_epochs(program, scope, exe, range(status.next(), EPOCHS))
    got = persistables(scope, main, mode)
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    same_on_every_rank({p.name: got[p.name] for p in main.all_parameters()})


def test_ranks_saving_into_one_directory_take_distinct_numbers(mpi_tmp_path):
    t, exe = detect(), fluid.Executor(fluid.CPUPlace())
    main, startup, program = fleet_model("AllReduce")
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    run_epochs(program, scope, exe, range(1))
    root = str(mpi_tmp_path / "shared")
    for epoch in range(2):  # all ranks at once; epoch 1 only once every epoch 0 is saved
        with fluid.scope_guard(scope):
            fleet.save_check_point(exe, root, TrainStatus(epoch))
        fleet.barrier_worker()
    numbers = sorted(int(n.split(".")[1]) for n in os.listdir(root) if n.startswith(PREFIX))
    assert numbers == list(range(2 * t.size))
    fleet.barrier_worker()
    if t.rank == 0:
        fleet.clean_redundant_check_points(root, checkpoint_num=1)
    fleet.barrier_worker()
    assert os.listdir(root) == [f"{PREFIX}.{2 * t.size - 1}"]
    fresh = fluid.Scope()
    exe.run(startup, scope=fresh)
    with fluid.scope_guard(fresh):
        assert fleet.load_check_point(exe, root, t.rank) == TrainStatus(1)
    saved = persistables(scope, main)
    for name, value in persistables(fresh, main).items():
        np.testing.assert_array_equal(value, saved[name], err_msg=name)
    fleet.barrier_worker()


def test_all_reduce_worker_across_ranks():
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    r, n = fleet.worker_index(), fleet.worker_num()
    values = np.array([r + 1.0, 2.0 * r, 1.0])
    expected = {"sum": [n * (n + 1) / 2, n * (n - 1), n], "max": [n, 2 * (n - 1), 1],
                "min": [1, 0, 1]}
    for mode, want in expected.items():
        out = np.zeros(3)
        fleet.all_reduce_worker(values, out, mode=mode)
        np.testing.assert_array_equal(out, want, err_msg=mode)
    as_list = [0, 0]
    fleet.all_reduce_worker([r, 1], as_list)  # fluid's fleet: "sum"
    assert as_list == [n * (n - 1) // 2, n]
    if n > 1:  # rank 0 passes one more element: every rank is told, none hangs
        with pytest.raises(InvalidArgumentError, match=rf"\[rank {r}/{n}\] all_reduce_worker: "
                           r"the workers passed different inputs \(rank 0: 3 x int64, "
                           r"rank 1: 2 x int64"):
            fleet.all_reduce_worker([1] * (3 if r == 0 else 2), [0] * (3 if r == 0 else 2))
