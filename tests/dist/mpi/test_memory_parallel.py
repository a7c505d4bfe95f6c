"""The memory knobs in data parallel (issue 13 item 3): with enable_inplace and
memory_optimize on, N ranks, each fed its 1/N of the batch, end with bitwise the parameters,
optimizer state and losses of the same N-rank run with both off, in AllReduce and in Reduce
mode (with and without fused all-reduce buckets and fused updates), identical on every rank; and
with the parameters of one process fed the whole batch (N ranks == 1 process). The in-place
updates did happen on every rank (the plans' memory reports), and a parameter array a caller
holds never changes under it.

The one-process reference runs on every rank, so expected values come from the script itself."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import same_on_every_rank

import spmd.fluid as fluid
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)
BATCH, STEPS = 24, 3  # divisible by 1, 2, 3 and 4 ranks


def build(opt: str):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 16], "float64")
        y = fluid.data("y", [None, 1], "int64")
        h = fluid.layers.fc(x, 24, act="relu")
        h = fluid.layers.fc(h, 12, act="tanh")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(h, 4), y))
        if opt == "sgd":
            fluid.optimizer.SGD(0.2).minimize(loss)
        elif opt == "momentum":
            fluid.optimizer.Momentum(0.1, 0.9).minimize(loss)
        else:
            fluid.optimizer.Adam(0.02).minimize(loss)
    return main, startup, loss


def batches():
    rng = np.random.default_rng(11)
    return [(rng.standard_normal((BATCH, 16)), rng.integers(0, 4, size=(BATCH, 1)))
            for _ in range(STEPS)]


def run(opt, mode=None, memory=False, fuse=False, hold=False):
    """(losses, persistable values) after STEPS steps: one process on the whole batch (mode
    None, plain Executor.run), or data parallel over every rank, each on its shard."""
    t = detect()
    main, startup, loss = build(opt)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    prog, rank, size = main, 0, 1
    if mode is not None:
        strategy = fluid.BuildStrategy()
        strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
        strategy.enable_inplace = strategy.memory_optimize = memory
        strategy.fuse_all_reduce_ops = strategy.fuse_all_optimizer_ops = fuse
        prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              build_strategy=strategy)
        rank, size = t.rank, t.size
    per = BATCH // size
    losses, held = [], []
    for x, y in batches():
        feed = {"x": x[rank * per:(rank + 1) * per], "y": y[rank * per:(rank + 1) * per]}
        out = exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)
        losses.append(np.asarray(out[0]).tobytes())
        if hold:  # the scope's own array of the first parameter, kept with its values
            array = np.asarray(scope.find_var(main.all_parameters()[0].name).get_tensor())
            held.append((array, array.copy()))
    for array, values in held:
        np.testing.assert_array_equal(array, values)
    state = {v.name: np.array(scope.find_var(v.name).get_tensor()) for v in main.list_vars()
             if v.persistable and scope.find_var(v.name) is not None
             and scope.find_var(v.name).is_initialized()}
    lent = None
    if mode is not None:
        feed_names = ["x", "y"]
        plan = exe.plan_cache.find(prog.data_parallel_program, feed_names, [loss.name], 0)
        lent = plan.memory_report().lent_total
    return losses, state, lent


@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("opt", ["sgd", "momentum", "adam"])
def test_memory_knobs_are_bitwise_the_run_without_them(opt, mode, fuse):
    losses, state, lent = run(opt, mode, memory=True, fuse=fuse, hold=True)
    plain_losses, plain_state, plain_lent = run(opt, mode, memory=False, fuse=fuse)
    assert plain_lent == 0
    if mode == "AllReduce" and not fuse:  # each rank updates whole, unfused parameters
        assert lent > 0
    assert losses == plain_losses
    assert set(state) == set(plain_state)
    for key, value in plain_state.items():
        np.testing.assert_array_equal(state[key], value, err_msg=key)
    trained = {p.name for p in build(opt)[0].all_parameters()}
    same_on_every_rank({k: v for k, v in state.items() if k in trained})
    if mode == "AllReduce" and not fuse:
        _, want, _ = run(opt)  # N ranks == 1 process
        for key in trained:
            np.testing.assert_allclose(state[key], want[key], rtol=1e-9,
                                       atol=1e-9 * float(np.abs(want[key]).max()), err_msg=key)
