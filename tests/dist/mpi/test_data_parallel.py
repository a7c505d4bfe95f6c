"""The core invariant: N ranks, each fed its 1/N of the batch, give the parameters of one
process fed the whole batch; and after every step all ranks hold bitwise the same parameters.

The single-process reference is computed on every rank (no communication), so expected values
come from the script itself, at any rank count."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
from dp_models import batches, build, params, shard

import spmd.fluid as fluid
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect
from spmd.errors import FeedError, PreconditionError

pytestmark = pytest.mark.mpi(min_size=1)
STEPS = 5
TOLERANCE = {"float64": 1e-10, "float32": 1e-5}


def reference(model, opt, dtype, data):
    main, startup, loss = build(model, opt, dtype)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for x, y in data:
        exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)
    return params(scope, main)


def digest(values: dict) -> np.ndarray:
    h = hashlib.sha256()
    for name in sorted(values):
        h.update(name.encode())
        h.update(np.ascontiguousarray(values[name]).tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8).copy()


@pytest.mark.parametrize("places", [1, 2])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("opt", ["sgd", "momentum", "adam"])
@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_n_ranks_equal_one_process(model, mode, fuse, opt, dtype, places):
    t = detect()
    mpi = MPICommunicator()
    data = batches(dtype, STEPS)
    want = reference(model, opt, dtype, data)

    main, startup, loss = build(model, opt, dtype)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    strategy.fuse_all_reduce_ops = fuse
    strategy.fuse_broadcast_ops = fuse
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * places)
    for x, y in data:
        (losses,) = exe.run(compiled, feed={"x": shard(x, t.rank, t.size),
                                            "y": shard(y, t.rank, t.size)},
                            fetch_list=[loss], scope=scope)
        assert losses.shape == (places,)
        got = params(scope, main)
        everyone = mpi.allgather(digest(got))
        assert (everyone == everyone[0]).all(), "ranks hold different parameters"
    for scope_i in compiled.place_scopes[1:]:  # every place holds the same values as place 0
        assert (digest(params(scope_i, main)) == digest(got)).all()
    for name, value in want.items():  # relative to each tensor's scale
        tol = TOLERANCE[dtype]
        np.testing.assert_allclose(got[name], value, rtol=tol,
                                   atol=tol * float(np.abs(value).max()), err_msg=name)


@pytest.mark.parametrize("places", [1, 2])
@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_fused_reduce_mode_in_small_buckets_equals_one_process(monkeypatch, model, places):
    """Buckets of about 1 KB: several reduce-scatters, the earlier ones on the communication
    thread while the backward pass goes on."""
    monkeypatch.setenv("FLAGS_fuse_parameter_memory_size", "0.001")
    test_n_ranks_equal_one_process(model, "Reduce", True, "adam", "float64", places)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_fused_reduce_mode_parameters_held_by_a_caller_keep_their_values(opt):
    """Fused Reduce mode hands the scope each step's parameters as views of that step's
    all-gather buffer, and uses a buffer again once nothing refers to it: arrays a caller
    took from the scope without a copy (numpy.asarray) keep their values through later
    steps, held for one step or for all of them, and the training still equals one process."""
    t = detect()
    data = batches("float64", 7)
    want = reference("mlp", opt, "float64", data)
    main, startup, loss = build("mlp", opt, "float64")
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    strategy.fuse_all_reduce_ops = True
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              build_strategy=strategy)
    held = {}  # step -> (the arrays taken without a copy, copies of their values)
    for step, (x, y) in enumerate(data):
        exe.run(compiled, feed={"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)},
                fetch_list=[loss], scope=scope)
        if step in (1, 3):
            taken = {p.name: np.asarray(scope.find_var(p.name).get_tensor())
                     for p in main.all_parameters()}
            held[step] = (taken, {name: a.copy() for name, a in taken.items()})
        if step == 4:
            del held[3]  # let go: its buffer may serve again
    for taken, kept in held.values():
        for name, value in taken.items():
            np.testing.assert_array_equal(value, kept[name], err_msg=name)
    got = params(scope, main)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10,
                                   atol=1e-10 * float(np.abs(value).max()), err_msg=name)


def test_reduce_mode_keeps_optimizer_state_on_owners_only():
    t = detect()
    main, startup, loss = build("mlp", "adam", "float64")
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              build_strategy=strategy)
    x, y = batches("float64", 1)[0]
    exe.run(compiled, feed={"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)},
            fetch_list=[loss], scope=scope)
    state = compiled.data_parallel_program.optimizer_state  # chunk state for a chunked param
    every = {s for names in state.values() for s in names}
    held = every & set(scope.local_var_names())
    if t.size == 1:
        assert compiled.state_sharding is None and held == every
        return
    owner = compiled.state_sharding.state_owner
    assert held == {s for s, r in owner.items() if r == t.rank}
    assert not set(main.optimizer_state["fc_0.w_0"]) & set(scope.local_var_names())  # chunked
    nbytes = sum(np.array(scope.find_var(s).get_tensor()).nbytes for s in held)
    mpi = MPICommunicator()
    counts = mpi.allgather(np.array([len(held), nbytes], dtype=np.int64))
    assert counts[:, 0].sum() == len(every)  # each state variable on exactly one rank
    share = counts[:, 1] / counts[:, 1].sum()
    assert (abs(share - 1 / t.size) < 0.2 / t.size).all(), share  # about 1/N each


def test_different_programs_fail_fast_on_every_rank():
    t = detect()
    if t.size == 1:
        pytest.skip("one rank cannot disagree with itself")
    main, startup, loss = build("mlp" if t.rank == 0 else "cnn", "sgd", "float64")
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    x, y = batches("float64", 1)[0]
    with pytest.raises(PreconditionError, match=r"\[rank \d+/\d+\] the ranks compiled different "
                                                r"programs.*first difference at op #\d+"):
        exe.run(compiled, feed={"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)},
                fetch_list=[loss], scope=scope)


def test_a_feed_error_or_a_forward_failure_leaves_the_program_usable():
    """A feed error is raised before any collective starts: the scope is untouched and the
    program runs on. So does an op failing in the forward pass, before the step's first
    collective. (tests/dist/mpi/test_run_after_error.py checks the numbers, one rank failing
    alone, and a step failing after its collectives began, which later runs refuse.)"""
    t = detect()
    failing = {"now": False}

    def maybe_fail(x):
        if failing["now"]:
            raise ZeroDivisionError("a host op failed on purpose")
        return np.array(x)

    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5  # one initialization on every rank
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 64], "float64")
        y = fluid.data("y", [None, 1], "int64")
        h = fluid.layers.fc(x, 16, act="tanh")
        out = main.current_block().create_var(name="h_checked", shape=h.shape, dtype=h.dtype)
        fluid.layers.py_func(maybe_fail, h, out)
        logits = fluid.layers.fc(fluid.layers.elementwise_add(h, out), 10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.SGD(0.1).minimize(loss)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    xs, ys = batches("float64", 1)[0]
    feed = {"x": shard(xs, t.rank, t.size), "y": shard(ys, t.rank, t.size)}
    before = params(scope, main)
    # fluid 1.8.5's words first (tagged with the rank), then spmd's own line with the fix
    words = (rf"(?s)\[rank {t.rank}/{t.size}\] The fed Variable 'x' .*"
             r"feed 'x': expected shape \[None, \d+\].*, got \[\d+, 3\]")
    with pytest.raises(FeedError, match=words):
        exe.run(compiled, feed={"x": feed["x"][:, :3], "y": feed["y"]}, fetch_list=[loss],
                scope=scope)
    after = params(scope, main)
    assert all(np.array_equal(before[n], after[n]) for n in before)  # the scope untouched
    exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)  # usable
    before = params(scope, main)
    failing["now"] = True  # on every rank, in the forward pass
    with pytest.raises(Exception, match="a host op failed on purpose"):
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    after = params(scope, main)
    assert all(np.array_equal(before[n], after[n]) for n in before)
    failing["now"] = False
    value, = exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    assert np.isfinite(value).all()
