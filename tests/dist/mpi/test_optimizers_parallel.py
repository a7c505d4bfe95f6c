"""Every optimizer, schedule and averaging wrapper in data parallel: N ranks, each fed its 1/N of
the batch, end with the parameters (and averages) of one process fed the whole batch, in
AllReduce and in Reduce mode (where fc_0.w_0 is cut into row chunks for the row-separable
update chains, and Lamb / LarsMomentum keep it whole), identical on every rank.

The one-process reference runs on every rank, so expected values come from the script itself."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

import spmd as paddle
import spmd.fluid as fluid
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)
BATCH, STEPS = 24, 3  # divisible by 1, 2, 3 and 4 ranks
OPT = fluid.optimizer


OPTIMIZERS = {
    "adagrad": lambda: OPT.Adagrad(0.1, initial_accumulator_value=0.1),
    "decayed_adagrad": lambda: OPT.DecayedAdagrad(0.1),
    "rmsprop": lambda: OPT.RMSProp(0.01, momentum=0.5, centered=True),
    "adadelta": lambda: OPT.Adadelta(1.0, rho=0.9),
    "adamax": lambda: OPT.Adamax(0.05, regularization=fluid.regularizer.L1Decay(1e-3)),
    "ftrl": lambda: OPT.Ftrl(0.1, l1=0.001),
    "lamb": lambda: OPT.Lamb(0.05, exclude_from_weight_decay_fn=lambda p: p.name.endswith("b_0")),
    "lars": lambda: OPT.LarsMomentum(0.5, momentum=0.9),
    "adamw": lambda: paddle.optimizer.AdamW(0.05, weight_decay=0.1,
                                            grad_clip=paddle.nn.ClipGradByGlobalNorm(0.5)),
    "nadam": lambda: paddle.optimizer.NAdam(0.05, weight_decay=1e-3, momentum_decay=0.01),
    "lookahead": lambda: OPT.LookaheadOptimizer(OPT.Momentum(0.1, 0.9), alpha=0.5, k=2),
    "decay_schedule": lambda: OPT.SGD(fluid.layers.exponential_decay(0.2, 1, 0.5),
                                    grad_clip=fluid.clip.GradientClipByNorm(0.5)),
    "paddle_scheduler": None,  # built in build(): the test steps its scheduler
}
AVERAGES = {"ema": lambda: _ema(), "model_average": lambda: OPT.ModelAverage(
    0.5, min_average_window=1, max_average_window=2)}


def _ema():
    ema = OPT.ExponentialMovingAverage(0.8)
    ema.update()
    return ema


def build(name):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 16], "float64")
        y = fluid.data("y", [None, 1], "int64")
        h = fluid.layers.fc(x, 8, act="tanh")
        logits = fluid.layers.fc(h, 4)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        sched = paddle.optimizer.lr.StepDecay(0.2, 1, 0.5)
        if name == "paddle_scheduler":
            opt = paddle.optimizer.SGD(learning_rate=sched)
        else:
            opt = OPTIMIZERS.get(name, lambda: OPT.SGD(0.2))()
        opt.minimize(loss)
        extra = AVERAGES[name]() if name in AVERAGES else None
    return main, startup, loss, sched, extra


def batches():
    rng = np.random.default_rng(11)
    return [(rng.standard_normal((BATCH, 16)), rng.integers(0, 4, size=(BATCH, 1)))
            for _ in range(STEPS)]


def values(scope, main, exe, extra):
    got = {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in main.all_parameters()}
    if extra is not None:  # the averages, swapped in by apply() on this rank's scope
        with fluid.scope_guard(scope), extra.apply(exe):
            got.update({p.name + "@AVG": np.array(scope.find_var(p.name).get_tensor())
                        for p in main.all_parameters()})
    return got


def run(name, mode=None):
    t = detect()
    main, startup, loss, sched, extra = build(name)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    prog, rank, size = main, 0, 1
    if mode is not None:
        strategy = fluid.BuildStrategy()
        strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
        prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              build_strategy=strategy)
        rank, size = t.rank, t.size
    per = BATCH // size
    for x, y in batches():
        exe.run(prog, feed={"x": x[rank * per:(rank + 1) * per],
                            "y": y[rank * per:(rank + 1) * per]}, scope=scope)
        sched.step()  # drives the learning rate of "paddle_scheduler" only
    return values(scope, main, exe, extra)


def digest(vals: dict) -> np.ndarray:
    h = hashlib.sha256()
    for name in sorted(vals):
        h.update(name.encode() + np.ascontiguousarray(vals[name]).tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8).copy()


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS) + sorted(AVERAGES))
def test_n_ranks_equal_one_process(name, mode):
    want = run(name)
    got = run(name, mode)
    everyone = MPICommunicator().allgather(digest(got))
    assert (everyone == everyone[0]).all(), "ranks hold different parameters"
    assert set(got) == set(want)
    for key, value in want.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-9,
                                   atol=1e-9 * float(np.abs(value).max()), err_msg=key)


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("seeding", ["same", "none", "per-rank", "rank-0-none"])
def test_random_updates_draw_alike_on_every_rank_and_place(mode, seeding):
    """Dpsgd's noise is drawn by the update ops: every rank and place must draw the same, or
    the replicas drift apart, whatever seeds the ranks gave their programs (rank 0's rules;
    ranks may seed differently for dropout), and without any seed (rank 0 picks one)."""
    t = detect()
    seed = {"same": 3, "none": 0, "per-rank": 3 + t.rank, "rank-0-none": t.rank}[seeding]
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 16], "float64")
        loss = fluid.layers.mean(fluid.layers.fc(x, 4))
        OPT.Dpsgd(0.1, clip=1.0, batch_size=4.0, sigma=2.0).minimize(loss)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * 2)
    for step, (xs, _) in enumerate(batches()):
        fetch = [loss] if step % 2 else []  # two plans: the noise must not restart
        exe.run(compiled, feed={"x": xs[t.rank::t.size]}, fetch_list=fetch, scope=scope)
    names = [p.name for p in main.all_parameters()]
    per_place = exe.run(compiled, feed={"x": batches()[0][0][t.rank::t.size]},
                        fetch_list=names, scope=scope, return_numpy=False,
                        return_merged=False)
    for name, values in zip(names, per_place):  # every place of this rank alike
        assert len(values) == 2
        np.testing.assert_array_equal(values[0], values[1], err_msg=name)
    everyone = MPICommunicator().allgather(digest(dict(zip(names, (v[0] for v in per_place)))))
    assert (everyone == everyone[0]).all(), "ranks hold different parameters"
