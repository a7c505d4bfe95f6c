"""Ranks that fetch different things train as ranks that fetch the same: the model zoo's BERT
train.py (release/1.8) fetches its losses on trainer 0 every few steps and nothing on the
others, so the ranks compile their plans at different steps. Every collective a plan makes
the first time it runs (whether a bucket is summed in node-shared memory: executor/
shared_bucket.py) must then not be made again by the one rank compiling a later plan of the
same shape, or it meets the others' next collective and the job hangs (it did, at the
second step). Expected values: the same run with every rank fetching the loss every step."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import batches, build, params, same_on_every_rank, shard

import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.executor import shared_bucket

pytestmark = pytest.mark.mpi(min_size=1)
STEPS = 6


def fetches_of(pattern: str, rank: int, step: int, loss, grad) -> list:
    if pattern == "same":
        return [loss]
    if pattern == "bert":  # trainer 0 every other step, the others never
        return [loss, grad] if rank == 0 and step % 2 == 0 else []
    # each rank its own, changing every step: nothing, the loss, a gradient
    return [[], [loss], [grad]][(step + rank) % 3]


def train(pattern: str, mode: str) -> dict:
    t = detect()
    main, startup, loss = build("mlp", "adam", "float32")
    grad = main.all_parameters()[0].name + "@GRAD"
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.fuse_all_reduce_ops = True
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                          build_strategy=strategy)
    for step, (x, y) in enumerate(batches("float32", STEPS)):
        exe.run(prog, feed={"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)},
                scope=scope, fetch_list=fetches_of(pattern, t.rank, step, loss, grad))
    return params(scope, main)


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
    same_on_every_rank(got)
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
