"""Fused all-reduce buckets (and Reduce mode's flat reduce-scatter and all-gather) summed in
node-shared memory (spmd/executor/shared_bucket.py): with every rank on this node, N ranks each
fed 1/N of the batch end, on every rank, with bitwise the same parameters (and in AllReduce mode
optimizer state); those (and the losses) of the same run with the buffers kept private (reduced
by MPI) to the last bit at 2 ranks (a + b either way) and to rounding beyond; and those of one
process fed the whole batch (N ranks == 1 process). The plan reports its bucket shared at 2
ranks and more, never at 1 (in Reduce mode the reduce-scatter's and the all-gather's buffers).
A fetched gradient keeps its values after later steps sum into the bucket it came from.

The one-process reference runs on every rank, so expected values come from the script itself."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import same_on_every_rank

import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.executor import shared_bucket

pytestmark = pytest.mark.mpi(min_size=1)
BATCH, STEPS = 24, 4  # divisible by 1, 2, 3 and 4 ranks


def build(opt: str, dtype: str):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 16], dtype)
        y = fluid.data("y", [None, 1], "int64")
        h = fluid.layers.fc(x, 24, act="relu")
        h = fluid.layers.fc(h, 12, act="tanh")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(h, 4), y))
        if opt == "sgd":
            fluid.optimizer.SGD(0.2).minimize(loss)
        else:
            fluid.optimizer.Adam(0.02).minimize(loss)
    return main, startup, loss


def batches(dtype: str):
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((BATCH, 16)).astype(dtype), rng.integers(0, 4, size=(BATCH, 1)))
            for _ in range(STEPS)]


def run(opt: str, dtype: str, data_parallel: bool = True, shared: bool = True,
        mode: str = "AllReduce"):
    """(losses, persistables, the plan's shared-bucket count, fetched gradients) after STEPS
    steps: data parallel over every rank, each on its shard, or one process on everything."""
    t = detect()
    main, startup, loss = build(opt, dtype)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    prog, rank, size = main, 0, 1
    if data_parallel:
        strategy = fluid.BuildStrategy()
        strategy.fuse_all_reduce_ops = True
        strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
        prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              build_strategy=strategy)
        rank, size = t.rank, t.size
    grad = main.all_parameters()[0].name + "@GRAD"
    per = BATCH // size
    losses, fetched = [], []
    shared_bucket.enabled = shared
    try:
        for x, y in batches(dtype):
            feed = {"x": x[rank * per:(rank + 1) * per], "y": y[rank * per:(rank + 1) * per]}
            out = exe.run(prog, feed=feed, fetch_list=[loss, grad], scope=scope)
            losses.append(np.asarray(out[0]).tobytes())
            fetched.append((np.asarray(out[1]), np.array(out[1])))
    finally:
        shared_bucket.enabled = True
    state = {v.name: np.array(scope.find_var(v.name).get_tensor()) for v in main.list_vars()
             if v.persistable and scope.find_var(v.name) is not None
             and scope.find_var(v.name).is_initialized()}
    count = None
    if data_parallel:
        plan = exe.plan_cache.find(prog.data_parallel_program, ["x", "y"], [loss.name, grad], 0)
        count = plan.shared_buckets()
    return losses, state, count, fetched


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_shared_bucket_sums_as_the_private_one(opt, dtype, mode):
    size = detect().size
    losses, state, count, fetched = run(opt, dtype, mode=mode)
    # AllReduce: the fused all-reduce's bucket; Reduce: the reduce-scatter's and the all-gather's
    assert count == ((1 if mode == "AllReduce" else 2) if size > 1 else 0)
    plain_losses, plain_state, plain_count, _ = run(opt, dtype, shared=False, mode=mode)
    assert plain_count == 0
    trained = {p.name for p in build(opt, dtype)[0].all_parameters()}
    # (Reduce mode splits the optimizer state across the ranks: the parameters are whole)
    same_on_every_rank(state if mode == "AllReduce" else {k: state[k] for k in trained})
    assert set(state) == set(plain_state)
    if size <= 2:  # a + b: MPI's sum and the shared one are the same operation
        assert losses == plain_losses
        for key, value in plain_state.items():
            np.testing.assert_array_equal(state[key], value, err_msg=key)
    tol = 1e-9 if dtype == "float64" else 2e-4
    for key, value in plain_state.items():
        np.testing.assert_allclose(state[key], value, rtol=tol, atol=tol, err_msg=key)
    _, want, _, _ = run(opt, dtype, data_parallel=False)  # N ranks == 1 process
    for key in trained:
        np.testing.assert_allclose(state[key], want[key], rtol=tol,
                                   atol=tol * float(np.abs(want[key]).max()), err_msg=key)
    # a fetched gradient is a copy: later steps summing into the bucket leave it as it was
    for array, values in fetched:
        np.testing.assert_array_equal(array, values)


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
def test_programs_of_one_shape_share_their_windows(mode):
    """MPI has room for about 2000 windows a process: a CompiledProgram made again and again
    (a test session, an evaluation loop) takes the windows the first one made."""
    run("sgd", "float32", mode=mode)
    made = shared_bucket.windows()
    for _ in range(3):
        _, state, _, _ = run("sgd", "float32", mode=mode)
    assert shared_bucket.windows() == made
    trained = {p.name for p in build("sgd", "float32")[0].all_parameters()}
    same_on_every_rank({k: state[k] for k in trained})


def test_buckets_past_the_shared_bytes_cap_stay_private():
    losses, state, count, _ = run("sgd", "float64")
    cap = shared_bucket.MAX_SHARED_BYTES
    shared_bucket.MAX_SHARED_BYTES = 0
    try:
        capped_losses, capped, capped_count, _ = run("sgd", "float64")
    finally:
        shared_bucket.MAX_SHARED_BYTES = cap
    assert capped_count == 0
    same_on_every_rank(capped)
    if detect().size <= 2:
        assert capped_losses == losses
        for key, value in state.items():
            np.testing.assert_array_equal(capped[key], value, err_msg=key)


def _two_programs_of_one_shape(shared: bool):
    """Reduce mode, two programs of one shape run in turn on their own scopes, 2 x STEPS
    steps, a caller holding a parameter of the first from step 2 on: (its values when taken,
    what it holds at the end, both scopes' parameters)."""
    built = [build("sgd", "float32"), build("sgd", "float32")]
    strategy = fluid.BuildStrategy()
    strategy.fuse_all_reduce_ops = True
    strategy.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    exe = fluid.Executor(fluid.CPUPlace())
    scopes = [fluid.Scope(), fluid.Scope()]
    progs = []
    for (m, s, lo), scope in zip(built, scopes):
        exe.run(s, scope=scope)
        progs.append(fluid.CompiledProgram(m).with_data_parallel(loss_name=lo.name,
                                                                 build_strategy=strategy))
    t = detect()
    per = BATCH // t.size
    name = built[0][0].all_parameters()[0].name
    held, kept = None, None
    shared_bucket.enabled = shared
    try:
        for step, (x, y) in enumerate(batches("float32") * 2):
            feed = {"x": x[t.rank * per:(t.rank + 1) * per],
                    "y": y[t.rank * per:(t.rank + 1) * per]}
            for prog, (_, _, lo), scope in zip(progs, built, scopes):
                exe.run(prog, feed=feed, fetch_list=[lo], scope=scope)
            if step == 1:
                held = np.asarray(scopes[0].find_var(name).get_tensor())
                kept = held.copy()
    finally:
        shared_bucket.enabled = True
    states = [{p.name: np.array(scope.find_var(p.name).get_tensor())
               for p in m.all_parameters()} for (m, _, _), scope in zip(built, scopes)]
    return kept, held, states


def test_reduce_mode_parameters_held_by_a_caller_keep_their_values():
    """Reduce mode's gathered parameters are node-shared blocks used in turn: a parameter a
    caller holds (numpy.asarray of the scope's tensor: no copy) keeps its values while later
    steps run, and so do the parameters of a second program of the same shape run in between
    (the plans of one shape share the blocks); the parameters are bitwise those of the run
    kept private at 2 ranks (a + b either way), to rounding beyond."""
    kept, held, (state, other) = _two_programs_of_one_shape(shared=True)
    np.testing.assert_array_equal(held, kept)
    for key, value in state.items():  # the same feeds from the same start
        np.testing.assert_array_equal(other[key], value, err_msg=key)
    same_on_every_rank(state)
    _, _, (plain, _) = _two_programs_of_one_shape(shared=False)
    for key, value in plain.items():
        if detect().size <= 2:
            np.testing.assert_array_equal(state[key], value, err_msg=key)
        np.testing.assert_allclose(state[key], value, rtol=2e-4, atol=2e-4, err_msg=key)
