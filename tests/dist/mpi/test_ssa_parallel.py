"""The SSA thread-pool executor in data parallel (issue 13 item 5): N ranks with two threads
per place (ExecutionStrategy.num_threads = 2 * places: fluid's one pool for the process's
places) end with bitwise the losses, parameters and optimizer state of the same N-rank run with
one, in AllReduce and Reduce mode, with and without fused buckets, on one place per rank and
on CPU_NUM=2 places per rank; identical on every rank. The collectives keep their program
order on every place (a reordered issue would deadlock the ranks, which the job's timeout
would show), and so do the random draws of dropout."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
from dp_models import GLOBAL_BATCH, batches, shard
from dp_models import build as build_dp

import spmd.fluid as fluid
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)
STEPS = 3
L = fluid.layers


def two_tower():
    """Two towers joined late, dropout in each, global-norm clipping, Adam."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 9
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 64], "float32")
        y = fluid.data("y", [None, 1], "int64")
        towers = []
        for width in (32, 24):
            h = L.dropout(L.fc(x, width, act="relu"), 0.2)
            towers.append(L.fc(h, 16, act="tanh"))
        loss = L.mean(L.softmax_with_cross_entropy(L.fc(L.concat(towers, 1), 10), y))
        fluid.optimizer.Adam(
            0.01, grad_clip=fluid.clip.GradientClipByGlobalNorm(0.5)).minimize(loss)
    return main, startup, loss


def build(model: str):
    return two_tower() if model == "two_tower" else build_dp("cnn", "momentum", "float32")


def run(model, mode, fuse, places, threads):
    """(losses, persistables, the first place's ScheduleReport) after STEPS steps, each rank
    on its shard; `places` 2 comes from CPU_NUM."""
    t = detect()
    main, startup, loss = build(model)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    bs = fluid.BuildStrategy()
    bs.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    bs.fuse_all_reduce_ops = fuse
    es = fluid.ExecutionStrategy()
    es.num_threads = threads
    program = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=bs, exec_strategy=es,
        places=[fluid.CPUPlace()] if places == 1 else None)
    losses = []
    for x, y in batches("float32", STEPS):
        feed = {"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)}
        losses.append(np.asarray(exe.run(program, feed=feed, fetch_list=[loss],
                                         scope=scope)[0]).tobytes())
    state = {v.name: np.array(scope.find_var(v.name).get_tensor()) for v in main.list_vars()
             if v.persistable and scope.find_var(v.name) is not None
             and scope.find_var(v.name).is_initialized()}
    plan = exe.plan_cache.find(program.data_parallel_program, ["x", "y"], [loss.name], 0)
    report = plan.schedule_report()
    exe.close()
    return losses, state, report


def digest(vals: dict) -> np.ndarray:
    h = hashlib.sha256()
    for name in sorted(vals):
        h.update(name.encode() + np.ascontiguousarray(vals[name]).tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8).copy()


@pytest.mark.parametrize("places", [1, 2])
@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("model", ["two_tower", "cnn"])
def test_two_threads_train_bitwise_as_one(model, mode, fuse, places, monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")
    losses, state, report = run(model, mode, fuse, places, 1)
    got_losses, got_state, got_report = run(model, mode, fuse, places, 2 * places)
    assert report.threads == 1 and got_report.threads == 2
    if detect().size * places > 1:
        assert got_report.chained > 0  # the collectives, in program order
    assert got_losses == losses
    assert got_state.keys() == state.keys()
    for name, value in state.items():
        np.testing.assert_array_equal(got_state[name], value, err_msg=name)
    trained = {p.name for p in build(model)[0].all_parameters()}
    everyone = MPICommunicator().allgather(digest({k: v for k, v in got_state.items()
                                                   if k in trained}))
    assert (everyone == everyone[0]).all(), "ranks hold different parameters"
    assert GLOBAL_BATCH % (detect().size * places) == 0
