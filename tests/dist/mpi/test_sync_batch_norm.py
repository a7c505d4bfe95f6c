"""BuildStrategy.sync_batch_norm: with batch statistics taken over the global batch, N ranks
(and 2 places per rank) on 1/N of each batch give one process's parameters and running
statistics; batch_norm with use_global_stats is left local (it reads no batch statistics)."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import shard

import spmd.fluid as fluid
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)
GLOBAL_BATCH, STEPS = 24, 3  # divisible by 1-4 ranks times 2 places


def build(model: str, dtype: str):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 2, 4, 4], dtype)
        y = fluid.data("y", [None, 1], "int64")
        if model == "conv":
            h = fluid.layers.conv2d(x, num_filters=3, filter_size=3, padding=1)
            h = fluid.layers.batch_norm(h, act="relu", momentum=0.8)
            h = fluid.layers.batch_norm(h, data_layout="NCHW", use_global_stats=True)
        else:
            h = fluid.layers.fc(x, 6)
            h = fluid.layers.batch_norm(h, act="tanh", epsilon=1e-4)
        logits = fluid.layers.fc(h, 5)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.Momentum(0.1, momentum=0.9).minimize(loss)
    return main, startup, loss


def data(dtype):
    rng = np.random.default_rng(7)
    return [((rng.standard_normal((GLOBAL_BATCH, 2, 4, 4)) * 2 + 1).astype(dtype),
             rng.integers(0, 5, size=(GLOBAL_BATCH, 1)).astype("int64"))
            for _ in range(STEPS)]


def persistables(scope, program) -> dict:
    return {v.name: np.array(scope.find_var(v.name).get_tensor())
            for v in program.list_vars() if v.persistable and scope.find_var(v.name)
            and not v.name.startswith("learning_rate")}


def train(model, dtype, parallel: bool, places: int = 1):
    t = detect()
    main, startup, loss = build(model, dtype)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    program = main
    if parallel:
        strategy = fluid.BuildStrategy()
        strategy.sync_batch_norm = True
        program = fluid.CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * places)
    for x, y in data(dtype):
        if parallel:
            x, y = shard(x, t.rank, t.size), shard(y, t.rank, t.size)
        exe.run(program, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)
    return persistables(scope, main)


@pytest.mark.parametrize("places", [1, 2])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("model", ["conv", "fc"])
def test_sync_batch_norm_equals_one_process(model, dtype, places):
    want = train(model, dtype, parallel=False)
    got = train(model, dtype, parallel=True, places=places)
    assert sorted(got) == sorted(want)
    tol = 1e-10 if dtype == "float64" else 2e-5
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=tol,
                                   atol=tol * max(1.0, float(np.abs(value).max())),
                                   err_msg=name)
