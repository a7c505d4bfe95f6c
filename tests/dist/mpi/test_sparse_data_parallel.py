"""Sparse embeddings in data parallel: the table's SelectedRows gradient is gathered (rows and
values of every rank, c_allgather_rows), never reduced as a dense table, and N ranks on 1/N of
the batch give the parameters of one process on the whole batch, in AllReduce and Reduce
mode, with one or two places per rank; ranks stay bitwise equal. The row-wise optimizers
update the table in place there too: a step allocates nothing of the table's size."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from dp_models import GLOBAL_BATCH, params, shard

import spmd.fluid as fluid
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)
VOCAB = 40

OPTIMIZERS = {
    "sgd": lambda: fluid.optimizer.SGD(0.2),
    "adam": lambda: fluid.optimizer.Adam(0.05),
    "lazy_adam": lambda: fluid.optimizer.Adam(0.05, lazy_mode=True),
    "momentum": lambda: fluid.optimizer.Momentum(0.1, momentum=0.9),
    "adagrad": lambda: fluid.optimizer.Adagrad(0.1),
    "ftrl": lambda: fluid.optimizer.Ftrl(0.1, l1=0.01, l2=0.01),
}


def build(opt: str, vocab: int = VOCAB):
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 9
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, 3], "int64")
        y = fluid.data("y", [None, 1], "int64")
        emb = fluid.embedding(ids, size=[vocab, 5], is_sparse=True)
        h = fluid.layers.fc(fluid.layers.reshape(emb, [-1, 15]), 8, act="tanh")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(h, 3), y))
        OPTIMIZERS[opt]().minimize(loss)
    return main, start, loss


def data(steps=4):
    rng = np.random.default_rng(4)
    return [(rng.integers(0, VOCAB, size=(GLOBAL_BATCH, 3)),
             rng.integers(0, 3, size=(GLOBAL_BATCH, 1))) for _ in range(steps)]


@pytest.mark.parametrize("places", [1, 2])
@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
def test_n_ranks_equal_one_process_with_sparse_gradients(opt, mode, places):
    t = detect()
    batches = data()
    main, start, loss = build(opt)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(start, scope=scope)
    for ids, y in batches:
        exe.run(main, feed={"ids": ids, "y": y}, fetch_list=[loss], scope=scope)
    want = params(scope, main)

    main, start, loss = build(opt)
    scope = fluid.Scope()
    exe.run(start, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * places)
    for ids, y in batches:
        exe.run(compiled, feed={"ids": shard(ids, t.rank, t.size),
                                "y": shard(y, t.rank, t.size)}, fetch_list=[loss], scope=scope)
    if t.size * places > 1:  # the table's gradient is gathered, never reduced densely
        ops = compiled.data_parallel_program.global_block().ops
        table_grad = main.global_block().all_parameters()[0].name + "@GRAD"
        gathers = [op for op in ops if op.type == "c_allgather_rows"]
        assert [op.input("X") for op in gathers] == [[table_grad]]
        assert not any(table_grad in op.input_arg_names for op in ops
                       if op.type.startswith(("c_allreduce", "c_reduce")))
    got = params(scope, main)
    blob = np.concatenate([got[n].ravel() for n in sorted(got)])
    everyone = MPICommunicator().allgather(blob)
    assert (everyone == everyone[0]).all(), "ranks hold different parameters"
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5,
                                   atol=1e-5 * float(np.abs(value).max()), err_msg=name)


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("opt", ["sgd", "lazy_adam", "adagrad", "ftrl"])
def test_a_data_parallel_sparse_step_allocates_nothing_of_the_tables_size(opt, mode):
    """The gathered rows are applied in place on every rank (the plan's memory report counts
    the table's loans), and a step's numpy allocations (tracemalloc) stay far below one
    table: no dense gradient, no copy of the table or its state, on any rank."""
    t = detect()
    vocab = 200_000  # 4 MB of float32 a table
    main, start, loss = build(opt, vocab)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(start, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy)
    rng = np.random.default_rng(5)
    batches = [(rng.integers(0, vocab, size=(GLOBAL_BATCH, 3)),
                rng.integers(0, 3, size=(GLOBAL_BATCH, 1))) for _ in range(4)]
    feeds = [{"ids": shard(ids, t.rank, t.size), "y": shard(y, t.rank, t.size)}
             for ids, y in batches]
    for feed in feeds[:3]:
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    tracemalloc.start()
    try:
        exe.run(compiled, feed=feeds[3], fetch_list=[loss], scope=scope)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    table_bytes = vocab * 5 * 4
    assert peak < table_bytes // 10, (
        f"[rank {t.rank}/{t.size}] a step's peak allocation {peak} B, table {table_bytes} B")
    plan = exe.plan_cache.find(compiled.data_parallel_program, list(feeds[3]), [loss.name], 0)
    assert plan.memory_report().lent_last_run >= 1
