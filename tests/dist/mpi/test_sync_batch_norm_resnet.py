"""Synchronized batch norm in a residual network over several steps: N ranks on 1/N of each
batch end with one process's parameters, velocities and running statistics.

The model is examples/book/image_classification.py's shape (conv -> batch_norm -> relu blocks
with an identity and a projected shortcut, average pooling, fc softmax; Momentum with L2Decay):
eight batch norms, so that while the backward pass runs each sync_batch_norm_grad's world sums
on the caller's thread, the gradient buckets of the layers above are in flight on the
communication thread (with fuse_all_reduce_ops off too: one collective per gradient). Every
rank must run the two kinds of collective in the same order, or their buffers mix.

float64, 8 steps, to 1e-10: in float32 the corpus's 1-process-versus-2-ranks comparison of
this network can part by 1e-3 after a few steps with nothing wrong (a relu input of 1e-7
rounded to the other side of zero in one of the runs changes that step's gradients by a few
percent), so float32 is no test of the synchronization."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import shard

import spmd.fluid as fluid
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)
GLOBAL_BATCH, STEPS = 8, 8  # divisible by 1, 2 and 4 ranks


def _conv_bn(x, channels, size, stride, act="relu"):
    h = fluid.layers.conv2d(x, num_filters=channels, filter_size=size, stride=stride,
                            padding=(size - 1) // 2, bias_attr=False)
    return fluid.layers.batch_norm(h, act=act)


def _block(x, ch_in, ch_out, stride):
    h = _conv_bn(x, ch_out, 3, stride)
    h = _conv_bn(h, ch_out, 3, 1, act=None)
    short = x if ch_in == ch_out else _conv_bn(x, ch_out, 1, stride, act=None)
    return fluid.layers.elementwise_add(h, short, act="relu")


def build():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 11
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3, 8, 8], "float64")
        y = fluid.data("y", [None, 1], "int64")
        h = _conv_bn(x, 4, 3, 1)
        h = _block(h, 4, 4, 1)
        h = _block(h, 4, 8, 2)
        h = _block(h, 8, 8, 1)
        h = fluid.layers.pool2d(h, pool_size=4, pool_type="avg", pool_stride=1)
        predict = fluid.layers.fc(h, size=5, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(predict, y))
        fluid.optimizer.Momentum(0.05, momentum=0.9,
                                 regularization=fluid.regularizer.L2Decay(5e-4)).minimize(loss)
    return main, startup, loss


def batches():
    rng = np.random.default_rng(3)
    for _ in range(STEPS):
        yield (rng.uniform(0, 1, (GLOBAL_BATCH, 3, 8, 8)),
               rng.integers(0, 5, (GLOBAL_BATCH, 1)).astype("int64"))


def train(parallel: bool, fuse: bool = True):
    t = detect()
    main, startup, loss = build()
    assert sum(op.type == "batch_norm" for op in main.global_block().ops) == 8
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    program = main
    if parallel:
        strategy = fluid.BuildStrategy()
        strategy.sync_batch_norm = True
        strategy.fuse_all_reduce_ops = fuse
        program = fluid.CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()])
    losses = []
    for x, y in batches():
        if parallel:
            x, y = shard(x, t.rank, t.size), shard(y, t.rank, t.size)
        losses.append(float(np.mean(exe.run(program, feed={"x": x, "y": y},
                                            fetch_list=[loss], scope=scope)[0])))
    state = {v.name: np.array(scope.find_var(v.name).get_tensor())
             for v in main.list_vars() if v.persistable and scope.find_var(v.name)
             and not v.name.startswith("learning_rate")}
    return state, losses


@pytest.mark.parametrize("fuse", [True, False], ids=["buckets", "per_gradient"])
def test_resnet_sync_batch_norm_equals_one_process(fuse):
    want, local_losses = train(parallel=False)
    got, _ = train(parallel=True, fuse=fuse)
    assert len(set(np.round(local_losses, 6))) > 1  # it trains
    assert sorted(got) == sorted(want)
    assert any(name.endswith("_velocity_0") for name in got)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10,
                                   atol=1e-10 * max(1.0, float(np.abs(value).max())),
                                   err_msg=f"{name} [rank {detect().rank}/{detect().size}]")
