"""The first data-parallel run gives every rank rank 0's persistables by broadcasting into each
rank's own arrays: no rank allocates a table-sized buffer on the way (tracemalloc's peak over
the first run of a 200000 x 64 embedding with lazy Adam stays far below the table), the values
after it are rank 0's bit for bit (rows the step did not touch, of the table and of both
moments), and a rank whose scope holds another shape fails on every rank, naming it. At one
rank there is nothing to broadcast from: the first run allocates no table either."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect
from spmd.errors import PreconditionError

pytestmark = pytest.mark.mpi(min_size=1)

ROWS, DIM = 200_000, 64
TABLE_BYTES = ROWS * DIM * 4
TOUCHED = 32  # the ids fed: rows [0, TOUCHED)


def _build():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, 1], "int64")
        y = fluid.data("y", [None, 1], "int64")
        emb = fluid.layers.embedding(ids, size=[ROWS, DIM], is_sparse=True,
                                     param_attr=fluid.ParamAttr(name="table"))
        logits = fluid.layers.fc(emb, 10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.Adam(0.01, lazy_mode=True).minimize(loss)
    return main, startup, loss


def _table_and_moments(main):
    return ["table"] + sorted(main.optimizer_state["table"])


def _rank_dependent_scope(main, startup, rank):
    """Every rank's startup run with its own seed, and its moments filled with its own
    numbers, so only a broadcast makes them agree."""
    startup.random_seed = 11 + rank
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(100 + rank)
    for name in _table_and_moments(main)[1:]:
        tensor = scope.find_var(name).get_tensor()
        shape = tensor.shape()
        if shape == [ROWS, DIM]:
            tensor.set(rng.random(shape, dtype=np.float32))
    return scope, exe


def _feed(rank):
    rng = np.random.default_rng(rank)
    return {"ids": rng.integers(0, TOUCHED, size=(8, 1)),
            "y": rng.integers(0, 10, size=(8, 1))}


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
def test_first_run_broadcasts_into_place(mode):
    t = detect()
    main, startup, loss = _build()
    scope, exe = _rank_dependent_scope(main, startup, t.rank)
    names = _table_and_moments(main)
    big = [n for n in names if scope.find_var(n).get_tensor().shape() == [ROWS, DIM]]
    assert len(big) == 3, big  # the table and lazy Adam's two moments
    comm = MPICommunicator() if t.size > 1 else None
    # rank 0's values before the run, on every rank (broadcast here, in this test's own way)
    rank0 = {}
    for n in big:
        value = np.array(scope.find_var(n).get_tensor())
        if comm is not None:
            comm.broadcast(value, 0)
        rank0[n] = value
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              build_strategy=strategy)
    tracemalloc.start()
    try:
        exe.run(compiled, feed=_feed(t.rank), fetch_list=[loss], scope=scope)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < TABLE_BYTES / 4, (
        f"[rank {t.rank}/{t.size}] the first run's allocations peaked at {peak / 1e6:.1f} MB "
        f"against a {TABLE_BYTES / 1e6:.1f} MB table")
    for n in big:
        after = np.array(scope.find_var(n).get_tensor())
        # rows the step did not touch are rank 0's, bit for bit
        np.testing.assert_array_equal(after[TOUCHED:].view(np.uint32),
                                      rank0[n][TOUCHED:].view(np.uint32), err_msg=n)
        if comm is not None:  # and every rank holds the same whole table after the step
            root = after.copy()
            comm.broadcast(root, 0)
            np.testing.assert_array_equal(after.view(np.uint32), root.view(np.uint32),
                                          err_msg=n)


def test_a_rank_holding_another_shape_fails_on_every_rank():
    t = detect()
    main, startup, loss = _build()
    scope, exe = _rank_dependent_scope(main, startup, t.rank)
    odd = t.size > 1 and t.rank == t.size - 1
    if odd:  # the last rank loaded a table of another size
        scope.find_var("table").get_tensor().set(np.zeros((ROWS // 2, DIM), np.float32))
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    if t.size == 1:
        exe.run(compiled, feed=_feed(0), fetch_list=[loss], scope=scope)
        return
    with pytest.raises(PreconditionError) as caught:
        exe.run(compiled, feed=_feed(t.rank), fetch_list=[loss], scope=scope)
    message = str(caught.value)
    assert f"[rank {t.rank}/{t.size}]" in message
    assert f"ranks [{t.size - 1}]" in message
    if odd:
        assert f"here 'table float32 [{ROWS // 2}, {DIM}] in place'" in message
        assert f"rank 0 'table float32 [{ROWS}, {DIM}] in place'" in message
