"""A gradient penalty trained data parallel (gradients of gradients, spmd/autodiff/double_grad.py):
loss = mean(D(x)) + mean(|d D(x) / d x|^2) per sample, with D a conv + fc net; minimize
differentiates the penalty's grad ops again. N ranks x P places on 1/(N P) of the batch each
equal one process on the whole batch: every op of the penalty is per sample (the input
gradient of a sample depends on that sample alone) and the loss is a mean over the batch."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import GLOBAL_BATCH, params, shard

import spmd.fluid as fluid
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)


def build():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    L = fluid.layers
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 16], "float64")
        x.stop_gradient = False
        h = L.reshape(x, [-1, 1, 4, 4])
        h = L.conv2d(h, num_filters=2, filter_size=3, padding=1)
        h = L.square(L.elu(h, alpha=0.5))
        score = L.fc(L.reshape(h, [-1, 32]), 1)
        dx, = fluid.gradients(score, x)
        penalty = L.mean(L.reduce_sum(L.square(dx), dim=1))
        loss = L.mean(score) + penalty
        fluid.optimizer.SGD(0.05).minimize(loss)
    return main, startup, loss


def run(program, main, startup, loss, shard_of):
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.uniform(-1, 1, (GLOBAL_BATCH, 16))
        exe.run(program, feed={"x": shard_of(x)}, fetch_list=[loss], scope=scope)
    return params(scope, main)


@pytest.mark.parametrize("places", [1, 2])
def test_gradient_penalty_data_parallel_equals_one_process(places):
    t = detect()
    main, startup, loss = build()
    want = run(main, main, startup, loss, lambda a: a)
    main, startup, loss = build()
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=[fluid.CPUPlace()] * places)
    got = run(compiled, main, startup, loss, lambda a: shard(a, t.rank, t.size))
    first = build()[0]
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(build()[1], scope=scope)
    start = params(scope, first)
    for name in want:
        assert not np.allclose(want[name], start[name])  # the penalty's step moved it
        np.testing.assert_allclose(got[name], want[name], rtol=1e-9, atol=1e-11)
