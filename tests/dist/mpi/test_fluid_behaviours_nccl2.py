"""Paddle 1.8's `update_method nccl2_reduce_layer` (test_dist_base.py with
dist_allreduce_op.py): the program all-reduces each gradient itself with
fluid.layers.collective._allreduce before apply_gradients, the transpiler runs in nccl2 mode and
BuildStrategy.num_trainers scales the loss gradient by 1/nranks. Every rank feeds the same
batch (use_reader_alloc off), so the losses must be the local run's (test_dist_base allows
1e-5). fluid 1.8.5 has the allreduce op on GPUs only, so the reference is the local run
itself, which is what Paddle's test compares with. The optimizer once read the gradient before
the all-reduce landed (half the update: 7e-4 away after one step)."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.fluid.layers import collective

pytestmark = pytest.mark.mpi(min_size=1)

STEPS = 5


def _build(reduce_layer: bool):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    const = fluid.initializer.Constant
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.layers.data(name="pixel", shape=[1, 8, 8], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        conv = fluid.nets.simple_img_conv_pool(
            input=img, filter_size=3, num_filters=4, pool_size=2, pool_stride=2, act="relu",
            param_attr=fluid.ParamAttr(initializer=const(0.01)))
        predict = fluid.layers.fc(conv, size=10, act="softmax",
                                  param_attr=fluid.ParamAttr(initializer=const(0.01)))
        avg_cost = fluid.layers.mean(fluid.layers.cross_entropy(input=predict, label=label))
        opt = fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9)
        if reduce_layer:
            params_grads = opt.backward(avg_cost)
            opt.apply_gradients([[p, collective._allreduce(g)] for p, g in params_grads])
        else:
            opt.minimize(avg_cost)
    return main, startup, avg_cost


def _batches():
    rng = np.random.RandomState(5)
    for _ in range(STEPS):
        yield [((rng.rand(1, 8, 8) * 2 - 1).astype("float32"), int(rng.randint(0, 10)))
               for _ in range(2)]


def _train(reduce_layer: bool, rank: int, size: int) -> list[float]:
    """The losses of the reduce-layer job's rank, or (reduce_layer False) of the local run:
    the plain program minimized in this process alone (no CompiledProgram, no collective)."""
    main, startup, avg_cost = _build(reduce_layer)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    program = main
    if reduce_layer:
        config = fluid.DistributeTranspilerConfig()
        config.mode = "nccl2"
        endpoints = ",".join(f"127.0.0.1:{6170 + r}" for r in range(size))
        fluid.DistributeTranspiler(config=config).transpile(
            rank, program=main, startup_program=startup, trainers=endpoints,
            current_endpoint=f"127.0.0.1:{6170 + rank}")
        build = fluid.BuildStrategy()
        build.num_trainers, build.trainer_id = size, rank
        program = fluid.CompiledProgram(main).with_data_parallel(
            loss_name=avg_cost.name, build_strategy=build, places=[fluid.CPUPlace()])
    exe.run(startup, scope=scope)
    feeder = fluid.DataFeeder(feed_list=["pixel", "label"], place=fluid.CPUPlace(),
                              program=main)
    return [float(exe.run(program, feed=feeder.feed(b), fetch_list=[avg_cost],
                          scope=scope)[0][0]) for b in _batches()]


def test_reduce_layer_losses_are_the_local_run():
    t = detect()
    dist = _train(True, t.rank, t.size)
    local = _train(False, 0, 1)
    assert len(set(np.round(local, 6))) > 1  # it trains: the losses move
    np.testing.assert_allclose(dist, local, rtol=0, atol=1e-5)
