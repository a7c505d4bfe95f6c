"""Synchronized batch norm: with batch statistics taken over the global batch, N ranks (and 2
places per rank) on 1/N of each batch give one process's parameters and running statistics, in
AllReduce and in Reduce mode.

Two spellings: fluid's batch_norm made synchronous by BuildStrategy.sync_batch_norm (batch_norm
with use_global_stats is left local: it reads no batch statistics), and paddle.nn.SyncBatchNorm
in a 2.x-style program (synchronous with or without the strategy flag), checked against the
same model built with fluid's batch_norm and trained by one process on the whole batch."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
from dp_models import shard

import spmd as paddle
import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.layers.nn_layers import get_default_dtype, set_default_dtype

pytestmark = pytest.mark.mpi(min_size=1)
GLOBAL_BATCH, STEPS = 24, 3  # divisible by 1-4 ranks times 2 places
MODES = {"allreduce": fluid.BuildStrategy.ReduceStrategy.AllReduce,
         "reduce": fluid.BuildStrategy.ReduceStrategy.Reduce}


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
        elif model == "fc":
            h = fluid.layers.fc(x, 6)
            h = fluid.layers.batch_norm(h, act="tanh", epsilon=1e-4)
        else:
            h = _two_norms(model, x)
        logits = fluid.layers.fc(h, 5)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.Momentum(0.1, momentum=0.9).minimize(loss)
    return main, startup, loss


@contextlib.contextmanager
def default_dtype(dtype: str):
    """paddle.nn layers create their parameters in the default dtype."""
    old = get_default_dtype()
    set_default_dtype(dtype)
    try:
        yield
    finally:
        set_default_dtype(old)


def _two_norms(model: str, x):
    """conv -> norm (NCHW) -> relu -> fc -> norm (NC) -> tanh, the norms being
    paddle.nn.SyncBatchNorm ("nn") or fluid's batch_norm ("nn_reference") under the same
    parameter names, so that the two programs' persistables line up name for name."""
    def norm(h, i, channels, data_format, momentum):
        if model == "nn_reference":
            return fluid.layers.batch_norm(
                h, momentum=momentum, data_layout="NCHW", param_attr=f"bn{i}.scale",
                bias_attr=f"bn{i}.bias", moving_mean_name=f"bn{i}_mean",
                moving_variance_name=f"bn{i}_variance")
        with default_dtype(x.dtype):
            bn = paddle.nn.SyncBatchNorm(
                channels, momentum=momentum, weight_attr=paddle.ParamAttr(name=f"bn{i}.scale"),
                bias_attr=paddle.ParamAttr(name=f"bn{i}.bias"), data_format=data_format,
                name=f"bn{i}")
        return bn(h)

    h = fluid.layers.conv2d(x, num_filters=3, filter_size=3, padding=1)
    h = fluid.layers.relu(norm(h, 0, 3, "NCHW", 0.8))
    h = fluid.layers.fc(h, 6)
    return fluid.layers.tanh(norm(h, 1, 6, "NC", 0.9))


def data(dtype):
    rng = np.random.default_rng(7)
    return [((rng.standard_normal((GLOBAL_BATCH, 2, 4, 4)) * 2 + 1).astype(dtype),
             rng.integers(0, 5, size=(GLOBAL_BATCH, 1)).astype("int64"))
            for _ in range(STEPS)]


def persistables(scope, program) -> dict:
    return {v.name: np.array(scope.find_var(v.name).get_tensor())
            for v in program.list_vars() if v.persistable and scope.find_var(v.name)
            and not v.name.startswith("learning_rate")}


def train(model, dtype, parallel: bool, places: int = 1, mode="allreduce",
          sync_flag: bool = True):
    t = detect()
    main, startup, loss = build(model, dtype)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    program = main
    if parallel:
        strategy = fluid.BuildStrategy()
        strategy.sync_batch_norm = sync_flag
        strategy.reduce_strategy = MODES[mode]
        program = fluid.CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * places)
    for x, y in data(dtype):
        if parallel:
            x, y = shard(x, t.rank, t.size), shard(y, t.rank, t.size)
        exe.run(program, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)
    return persistables(scope, main), main


def check_equal(got: dict, want: dict, program, dtype: str, mode: str):
    # Reduce mode keeps each optimizer state variable (velocity) on its owner only: every rank
    # must hold every parameter and running statistic, and what state it holds must be right
    state = {n for names in program.optimizer_state.values() for n in names}
    assert set(got) <= set(want), sorted(set(got) - set(want))
    assert set(want) - state <= set(got), sorted(set(want) - state - set(got))
    if mode == "allreduce":
        assert sorted(got) == sorted(want)
    tol = 1e-10 if dtype == "float64" else 2e-5
    for name in got:
        value = want[name]
        np.testing.assert_allclose(got[name], value, rtol=tol,
                                   atol=tol * max(1.0, float(np.abs(value).max())),
                                   err_msg=name)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("places", [1, 2])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("model", ["conv", "fc"])
def test_sync_batch_norm_equals_one_process(model, dtype, places, mode):
    want, _ = train(model, dtype, parallel=False)
    got, program = train(model, dtype, parallel=True, places=places, mode=mode)
    check_equal(got, want, program, dtype, mode)


@pytest.mark.parametrize("sync_flag", [False, True], ids=["no_flag", "flag"])
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("places", [1, 2])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_nn_sync_batch_norm_equals_one_process(dtype, places, mode, sync_flag):
    want, _ = train("nn_reference", dtype, parallel=False)
    got, program = train("nn", dtype, parallel=True, places=places, mode=mode,
                         sync_flag=sync_flag)
    check_equal(got, want, program, dtype, mode)
