"""Ranks that fetch different things train as ranks that fetch the same: the model zoo's BERT
train.py (release/1.8) fetches its losses on trainer 0 every few steps and nothing on the
others, so the ranks compile their plans at different steps. Every collective a plan makes
the first time it runs (whether a bucket is summed in node-shared memory: executor/
shared_bucket.py) must then not be made again by the one rank compiling a later plan of the
same shape, or it meets the others' next collective and the job hangs (it did, at the
second step). Expected values: the same run with every rank fetching the loss every step."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect
from spmd.executor import shared_bucket

pytestmark = pytest.mark.mpi(min_size=1)
BATCH, STEPS = 24, 6  # divisible by 1, 2, 3 and 4 ranks


def build():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 11
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 10], "float32")
        y = fluid.data("y", [None, 1], "int64")
        h = fluid.layers.fc(x, 16, act="relu")
        pred = fluid.layers.fc(h, 4, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, y))
        acc = fluid.layers.accuracy(pred, y)
        fluid.optimizer.Adam(0.02).minimize(loss)
    return main, startup, loss, acc


def fetches_of(pattern: str, rank: int, step: int, loss, acc, grad) -> list:
    if pattern == "same":
        return [loss]
    if pattern == "bert":  # trainer 0 every other step, the others never
        return [loss, acc] if rank == 0 and step % 2 == 0 else []
    # each rank its own, changing every step: nothing, the loss, a gradient
    return [[], [loss], [grad, acc]][(step + rank) % 3]


def train(pattern: str, mode: str) -> dict:
    t = detect()
    main, startup, loss, acc = build()
    grad = main.all_parameters()[0].name + "@GRAD"
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.fuse_all_reduce_ops = True
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                          build_strategy=strategy)
    rng = np.random.default_rng(3)
    per = BATCH // t.size
    for step in range(STEPS):
        x = rng.standard_normal((BATCH, 10)).astype("float32")
        y = rng.integers(0, 4, size=(BATCH, 1))
        part = slice(t.rank * per, (t.rank + 1) * per)
        exe.run(prog, feed={"x": x[part], "y": y[part]}, scope=scope,
                fetch_list=fetches_of(pattern, t.rank, step, loss, acc, grad))
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in main.all_parameters()}


def digest(vals: dict) -> np.ndarray:
    h = hashlib.sha256()
    for name in sorted(vals):
        h.update(name.encode() + np.ascontiguousarray(vals[name]).tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8).copy()


@pytest.mark.parametrize("shared", [True, False], ids=["node_shared", "private"])
@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("pattern", ["bert", "each_its_own"])
def test_ranks_fetching_different_things_train_as_ranks_fetching_the_same(pattern, mode,
                                                                           shared):
    # private: the buckets reduced by MPI itself, as across nodes
    shared_bucket.enabled = shared
    try:
        got = train(pattern, mode)
        want = train("same", mode)
    finally:
        shared_bucket.enabled = True
    everyone = MPICommunicator().allgather(digest(got))
    assert (everyone == everyone[0]).all(), "ranks hold different parameters"
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
