"""slim's Compressor under mpiexec: each rank trains on its shard of every global batch, a
UniformPruneStrategy prunes after the first epoch (every rank choosing the same filters, the
parameters being equal everywhere), and N ranks end with the parameters and evaluations of
ranks all fed the whole batches (gradients averaged over equal shards = the whole batch's)."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import shard

import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.fluid.contrib.slim.core import Compressor
from spmd.fluid.contrib.slim.prune import StructurePruner, UniformPruneStrategy

pytestmark = pytest.mark.mpi(min_size=1)
FEEDS = [("image", "image"), ("label", "label")]


def _data():
    rng = np.random.RandomState(0)
    return [[(rng.randn(1, 8, 8).astype("float32"), np.array([rng.randint(3)], "int64"))
             for _ in range(8)] for _ in range(3)]


def _run(reader):
    with fluid.unique_name.guard():
        main, start = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, start):
            x = fluid.data("image", [None, 1, 8, 8])
            y = fluid.data("label", [None, 1], dtype="int64")
            c1 = fluid.layers.conv2d(x, 4, 3, padding=1, act="relu",
                                     param_attr=fluid.ParamAttr(name="conv1_weights"))
            c2 = fluid.layers.conv2d(c1, 6, 3, padding=1, act="relu",
                                     param_attr=fluid.ParamAttr(name="conv2_weights"))
            logits = fluid.layers.fc(fluid.layers.pool2d(c2, 2, pool_stride=2), 3)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        test = main.clone(for_test=True)
        scope = fluid.Scope()
        fluid.Executor(fluid.CPUPlace()).run(start, scope=scope)
        rng = np.random.RandomState(4)
        for v in sorted(main.all_parameters(), key=lambda v: v.name):
            scope.find_var(v.name).get_tensor().set(
                rng.uniform(-0.5, 0.5, v.shape).astype("float32"), fluid.CPUPlace())
        comp = Compressor(fluid.CPUPlace(), scope, main, train_reader=reader,
                          train_feed_list=FEEDS, train_fetch_list=[("loss", loss.name)],
                          eval_program=test, eval_reader=reader, eval_feed_list=FEEDS,
                          eval_fetch_list=[("loss", loss.name)],
                          train_optimizer=fluid.optimizer.Momentum(0.05, 0.9), log_period=100)
        comp._add_strategy(UniformPruneStrategy(
            StructurePruner({"*": 0}, {"*": "l1_norm"}), start_epoch=1, end_epoch=3,
            target_ratio=0.5, metric_name="loss"))
        graph = comp.run()
    assert comp.failed_epochs == []
    return {p.name(): np.array(scope.find_var(p.name()).get_tensor())
            for p in graph.all_parameters()}


def test_shards_prune_and_train_as_whole_batches():
    t = detect()
    data = _data()
    want = _run(lambda: iter(data))
    got = _run(lambda: ([s for s in shard(batch, t.rank, t.size)] for batch in data))
    assert got["conv1_weights"].shape[0] < 4  # pruned
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
