"""The core invariant for the contributed text-matching ops (match_matrix_tensor, var_conv_2d,
sequence_topk_avg_pooling): N ranks, each fed its share of the query / title pairs (shares
differing in size), train the parameters one process trains on every pair, in AllReduce and
Reduce mode, with one or two places per rank."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)
VOCAB, EMB, CLASSES, STEPS = 20, 4, 3, 3


def build():
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 7
    contrib = fluid.contrib.layers
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        query = fluid.layers.data(name="query", shape=[1], dtype="int64", lod_level=1)
        title = fluid.layers.data(name="title", shape=[1], dtype="int64", lod_level=1)
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        q = fluid.layers.embedding(query, size=[VOCAB, EMB])
        t = fluid.layers.embedding(title, size=[VOCAB, EMB])
        match, _ = contrib.match_matrix_tensor(q, t, 2, act="tanh")
        conv = contrib.var_conv_2d(match, q, t, 2, 3, 3, act="relu")
        pooled = contrib.sequence_topk_avg_pooling(conv, q, t, [1, 2], 3)
        logits = fluid.layers.fc(fluid.layers.sequence_pool(pooled, "sum"), CLASSES)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(0.2).minimize(loss)
    return main, start, loss


def batches(count: int):
    rng = np.random.default_rng(3)
    out = []
    for _ in range(count):
        pairs = 2 * detect().size + 3
        ql, tl = rng.integers(1, 5, size=pairs), rng.integers(1, 5, size=pairs)
        out.append((ql, rng.integers(0, VOCAB, (ql.sum(), 1)), tl,
                    rng.integers(0, VOCAB, (tl.sum(), 1)),
                    rng.integers(0, CLASSES, (pairs, 1))))
    return out


def share(ql, qw, tl, tw, labels, rank: int, size: int):
    base, extra = divmod(ql.size, size)
    counts = [base + (1 if r >= size - extra else 0) for r in range(size)]
    first, n = sum(counts[:rank]), counts[rank]
    feed = {}
    for name, lengths, words in (("query", ql, qw), ("title", tl, tw)):
        off = np.concatenate([[0], np.cumsum(lengths)])
        feed[name] = fluid.create_lod_tensor(words[off[first]:off[first + n]].astype("int64"),
                                             [lengths[first:first + n].tolist()],
                                             fluid.CPUPlace())
    feed["label"] = labels[first:first + n].astype("int64")
    return feed


def parameters(scope, main):
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in main.global_block().all_parameters()}


@pytest.mark.parametrize("places", [1, 2])
@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
def test_n_ranks_on_pair_shares_equal_one_process(mode, places):
    t = detect()
    data = batches(STEPS)
    main, start, loss = build()
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(start, scope=scope)
    for batch in data:
        exe.run(main, feed=share(*batch, 0, 1), fetch_list=[loss], scope=scope)
    want = parameters(scope, main)

    main, start, loss = build()
    scope = fluid.Scope()
    exe.run(start, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * places)
    for batch in data:
        exe.run(compiled, feed=share(*batch, t.rank, t.size), fetch_list=[loss], scope=scope)
    got = parameters(scope, main)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=2e-5,
                                   atol=2e-5 * float(np.abs(value).max()), err_msg=name)
