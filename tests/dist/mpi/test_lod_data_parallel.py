"""The core invariant for sequence models: N ranks, each fed its share of the sequences (the
shares differing in size), give the parameters of one process fed every sequence, in
AllReduce and Reduce mode, with one or two places per rank; and the ranks stay bitwise equal.

The loss averages either sequences (a pooled classifier) or tokens (per-word tagging): the
loss gradient is weighted by each place's rows of what the loss averages, so both come out
equal to the one-process run."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)
VOCAB, CLASSES, STEPS = 30, 4, 4


def build(level: str):
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 5
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
        emb = fluid.layers.embedding(words, size=[VOCAB, 6])
        hidden = fluid.layers.fc(emb, 8, act="tanh")
        if level == "sequence":
            label = fluid.layers.data(name="label", shape=[1], dtype="int64")
            logits = fluid.layers.fc(fluid.layers.sequence_pool(hidden, "average"), CLASSES)
        else:  # one label per word, carrying the words' LoD
            label = fluid.layers.data(name="label", shape=[1], dtype="int64", lod_level=1)
            logits = fluid.layers.fc(hidden, CLASSES)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.Adam(0.05).minimize(loss)
    return main, start, loss


def batches(level: str, count: int):
    """`count` global batches of 2 * size + 3 sequences each (so shares differ by rank)."""
    rng = np.random.default_rng(11)
    out = []
    for _ in range(count):
        lengths = rng.integers(1, 6, size=2 * detect().size + 3)
        words = rng.integers(0, VOCAB, size=(lengths.sum(), 1)).astype("int64")
        rows = lengths.sum() if level == "token" else lengths.size
        labels = rng.integers(0, CLASSES, size=(rows, 1)).astype("int64")
        out.append((lengths, words, labels))
    return out


def share(level, lengths, words, labels, rank: int, size: int):
    """Rank `rank`'s sequences: a contiguous run, the first ranks getting one fewer."""
    base, extra = divmod(lengths.size, size)
    counts = [base + (1 if r >= size - extra else 0) for r in range(size)]
    first = sum(counts[:rank])
    mine = lengths[first:first + counts[rank]]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    lo, hi = offsets[first], offsets[first + counts[rank]]
    feed = {"words": fluid.create_lod_tensor(words[lo:hi], [mine.tolist()], fluid.CPUPlace())}
    if level == "token":
        feed["label"] = fluid.create_lod_tensor(labels[lo:hi], [mine.tolist()], fluid.CPUPlace())
    else:
        feed["label"] = labels[first:first + counts[rank]]
    return feed


def parameters(scope, main):
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in main.global_block().all_parameters()}


@pytest.mark.parametrize("places", [1, 2])
@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("level", ["sequence", "token"])
def test_n_ranks_on_uneven_sequence_shares_equal_one_process(level, mode, places):
    t = detect()
    data = batches(level, STEPS)
    main, start, loss = build(level)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(start, scope=scope)
    for batch in data:
        exe.run(main, feed=share(level, *batch, 0, 1), fetch_list=[loss], scope=scope)
    want = parameters(scope, main)

    main, start, loss = build(level)
    scope = fluid.Scope()
    exe.run(start, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * places)
    for batch in data:
        exe.run(compiled, feed=share(level, *batch, t.rank, t.size), fetch_list=[loss],
                scope=scope)
    got = parameters(scope, main)
    digests = MPICommunicator().allgather(
        np.frombuffer(b"".join(got[n].tobytes() for n in sorted(got)), np.uint8)[:4096].copy())
    assert (digests == digests[0]).all(), "ranks hold different parameters"
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=2e-5,
                                   atol=2e-5 * float(np.abs(value).max()), err_msg=name)
