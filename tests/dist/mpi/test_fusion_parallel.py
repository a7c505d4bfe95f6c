"""The fusion passes in data parallel (issue 13 item 4): with fuse_elewise_add_act_ops,
fuse_bn_act_ops and fuse_all_optimizer_ops on, N ranks, each fed its 1/N of the batch, end with
the parameters and optimizer state of one unfused process fed the whole batch, in AllReduce
and in Reduce mode, identical on every rank; and bitwise those of the same N-rank run unfused
(same collectives, same order: the passes change no number). A model with batch_norm (batch
statistics per rank) is checked against the unfused N-rank run only.

The one-process reference runs on every rank, so expected values come from the script itself."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import same_on_every_rank

import spmd.fluid as fluid
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)
BATCH, STEPS = 24, 3  # divisible by 1, 2, 3 and 4 ranks
FIELDS = ("fuse_elewise_add_act_ops", "fuse_bn_act_ops", "fuse_all_optimizer_ops")


def optimizer(name: str):
    if name == "sgd":
        return fluid.optimizer.SGD(0.2)
    if name == "momentum":
        return fluid.optimizer.Momentum(0.1, 0.9, regularization=fluid.regularizer.L2Decay(1e-3))
    return fluid.optimizer.Adam(0.02, grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0))


def build(model: str, opt: str):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 16], "float64")
        y = fluid.data("y", [None, 1], "int64")
        h = fluid.layers.fc(x, 24, act="relu")
        if model == "bn":
            h = fluid.layers.batch_norm(fluid.layers.fc(h, 24), act="relu")
        h = fluid.layers.fc(h, 12, act="tanh")
        h = fluid.layers.elementwise_add(h, fluid.layers.sigmoid(fluid.layers.fc(x, 12)))
        logits = fluid.layers.fc(h, 4)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        optimizer(opt).minimize(loss)
    return main, startup, loss


def batches():
    rng = np.random.default_rng(11)
    return [(rng.standard_normal((BATCH, 16)), rng.integers(0, 4, size=(BATCH, 1)))
            for _ in range(STEPS)]


def run(model, opt, mode=None, fused=False):
    """Persistable values after STEPS steps: one process on the whole batch (mode None), or
    data parallel over every rank, each on its shard."""
    t = detect()
    main, startup, loss = build(model, opt)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    prog, rank, size = main, 0, 1
    if mode is not None:
        strategy = fluid.BuildStrategy()
        strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
        for f in FIELDS:
            setattr(strategy, f, fused)
        prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              build_strategy=strategy)
        rank, size = t.rank, t.size
    per = BATCH // size
    for x, y in batches():
        exe.run(prog, feed={"x": x[rank * per:(rank + 1) * per],
                            "y": y[rank * per:(rank + 1) * per]}, scope=scope)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.all_parameters()}
    if fused:
        ops = prog.data_parallel_program.global_block().ops
        types = {op.type for op in ops}
        assert "fused_elemwise_activation_grad" in types, sorted(types)
        if mode == "AllReduce":  # in Reduce mode an owner of one piece keeps its own update
            assert f"fused_{opt}" in types and opt not in types, sorted(types)
        if model == "bn":
            assert "fused_batch_norm_act" in types, sorted(types)
    return params


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("opt", ["sgd", "momentum", "adam"])
def test_fused_n_ranks_equal_one_process(opt, mode):
    want = run("mlp", opt)
    got = run("mlp", opt, mode, fused=True)
    same_on_every_rank(got)
    assert set(got) == set(want)
    for key, value in want.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-9,
                                   atol=1e-9 * float(np.abs(value).max()), err_msg=key)
    plain = run("mlp", opt, mode, fused=False)
    for key, value in plain.items():  # the passes change no number
        np.testing.assert_array_equal(got[key], value, err_msg=key)


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
def test_fused_batch_norm_model_is_bitwise_unfused(mode):
    got = run("bn", "momentum", mode, fused=True)
    # batch_norm's moving statistics are of each rank's shard: the trained parameters agree
    trained = {p.name for p in build("bn", "momentum")[0].all_parameters() if p.trainable}
    same_on_every_rank({k: v for k, v in got.items() if k in trained})
    plain = run("bn", "momentum", mode, fused=False)
    for key, value in plain.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
