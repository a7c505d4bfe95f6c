"""fluid.optimizer names added late, against fluid 1.8.5's stored outputs
(tests/oracle/make_optimizer_extra.py): RecomputeOptimizer trains exactly as its inner
optimizer; Dpsgd's update with a fixed seed is fluid's to float32 rounding, and without one
draws fresh N(0, sigma) noise each step; DGCMomentumOptimizer and PipelineOptimizer refuse at
construction, naming what to use instead."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError, PreconditionError
from spmd.optimizer.dpsgd import fluid_dpsgd_noise
from tests.oracle_io import load

ORACLE = load("optimizer_extra")
OPT = fluid.optimizer


def init(shape, offset):
    n = int(np.prod(shape))
    return (np.sin(np.arange(n) * 0.7 + offset) * 0.5).astype("float32").reshape(shape)


def mlp_batches():
    rng = np.random.RandomState(3)
    return [(rng.uniform(-1, 1, (4, 6)).astype("float32"),
             rng.randint(0, 3, (4, 1)).astype("int64")) for _ in range(3)]


INNER = {"sgd": lambda: OPT.SGD(learning_rate=0.1),
         "momentum": lambda: OPT.Momentum(learning_rate=0.1, momentum=0.9),
         "adam": lambda: OPT.Adam(learning_rate=0.01)}


def train_mlp(inner, recompute):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 6], dtype="float32")
        y = fluid.data(name="y", shape=[None, 1], dtype="int64")

        def attr(shape, k):
            return fluid.ParamAttr(
                initializer=fluid.initializer.NumpyArrayInitializer(init(shape, k)))

        hidden = fluid.layers.fc(x, 8, act="relu", param_attr=attr([6, 8], 0),
                                 bias_attr=attr([8], 1))
        pred = fluid.layers.fc(hidden, 3, act="softmax", param_attr=attr([8, 3], 2),
                               bias_attr=attr([3], 3))
        loss = fluid.layers.reduce_mean(fluid.layers.cross_entropy(pred, y))
        opt = INNER[inner]()
        if recompute:
            opt = OPT.RecomputeOptimizer(opt)
            opt._set_checkpoints([hidden, pred])
        opt.minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for bx, by in mlp_batches():
        out, = exe.run(main, feed={"x": bx, "y": by}, fetch_list=[loss], scope=scope)
        losses.append(float(np.asarray(out).reshape(-1)[0]))
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.global_block().all_parameters()}
    return {"losses": losses, "params": params,
            "op_types": [op.type for op in main.global_block().ops]}


@pytest.mark.parametrize("inner", sorted(INNER))
def test_recompute_trains_as_fluid_and_as_its_inner_optimizer(inner):
    want = ORACLE[f"recompute/{inner}"]
    # in fluid too, recomputation changes no number
    np.testing.assert_array_equal(want["recompute"]["losses"], want["plain"]["losses"])
    got = train_mlp(inner, recompute=True)
    plain = train_mlp(inner, recompute=False)
    np.testing.assert_allclose(got["losses"], want["recompute"]["losses"], rtol=1e-5)
    for name, value in want["recompute"]["params"].items():
        np.testing.assert_allclose(got["params"][name], value, rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    assert got["losses"] == plain["losses"]
    for name in plain["params"]:
        np.testing.assert_array_equal(got["params"][name], plain["params"][name])
    # fluid's recompute program: each segment's forward ops run again before its gradient
    # ops (spmd names cross_entropy2's gradient op cross_entropy2_grad, fluid cross_entropy_grad2)
    fluids = [t.replace("cross_entropy_grad2", "cross_entropy2_grad")
              for t in want["recompute"]["op_types"]]
    assert got["op_types"] == fluids
    assert len(got["op_types"]) == len(plain["op_types"]) + 4  # 2 segments x (mul, add)


def _tiny_loss():
    x = fluid.data(name="x", shape=[None, 2], dtype="float32")
    return fluid.layers.reduce_mean(fluid.layers.fc(x, 1))


def test_recompute_minimize_needs_checkpoints_as_in_fluid():
    kind, text = ORACLE["recompute/errors"]["no_checkpoints"]
    assert kind == "AssertionError" and "_set_checkpoints" in text
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        opt = OPT.RecomputeOptimizer(OPT.SGD(0.1))
        with pytest.raises(PreconditionError, match="_set_checkpoints"):
            opt.minimize(_tiny_loss())


def test_recompute_load_is_not_supported_as_in_fluid():
    kind, text = ORACLE["recompute/errors"]["load"]
    opt = OPT.RecomputeOptimizer(OPT.Adam(0.01))
    with pytest.raises(NotImplementedError) as info:
        opt.load({})
    assert kind == "NotImplementedError" and str(info.value) == text


def test_recompute_bad_arguments_are_named():
    with pytest.raises(InvalidArgumentError, match="must be a fluid optimizer"):
        OPT.RecomputeOptimizer("adam")
    opt = OPT.RecomputeOptimizer(OPT.SGD(0.1))
    with pytest.raises(InvalidArgumentError, match="list of Variables"):
        opt._set_checkpoints("fc_0.tmp_0")
    with pytest.raises(InvalidArgumentError, match="checkpoint #1 must be a Variable"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            opt._set_checkpoints([_tiny_loss(), "fc_0.tmp_1"])
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        other = _tiny_loss()
    opt._set_checkpoints([other])
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(InvalidArgumentError, match="another Program"):
            opt.minimize(_tiny_loss())


def test_recompute_shares_the_inner_learning_rate():
    opt = OPT.RecomputeOptimizer(OPT.Momentum(learning_rate=0.05, momentum=0.9))
    assert opt.get_lr() == pytest.approx(0.05)
    assert isinstance(opt, OPT.Optimizer)


# -- Dpsgd -----------------------------------------------------------------------------------
DPSGD_CASES = sorted(k for k in ORACLE if k.startswith("dpsgd/"))


def train_dpsgd(steps, x, seed, clip, batch_size, sigma, learning_rate):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        xv = fluid.data(name="x", shape=[None, 3], dtype="float32")
        w = fluid.layers.create_parameter(
            [3, 2], "float32", name="w",
            default_initializer=fluid.initializer.NumpyArrayInitializer(
                np.arange(6, dtype="float32").reshape(3, 2) / 10))
        loss = fluid.layers.reduce_mean(fluid.layers.matmul(xv, w) ** 2)
        OPT.Dpsgd(learning_rate=learning_rate, clip=clip, batch_size=batch_size, sigma=sigma,
                  seed=seed).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    grads, params = [], []
    for _ in range(steps):
        g, p = exe.run(main, feed={"x": x}, fetch_list=["w@GRAD", "w"], scope=scope)
        grads.append(np.array(g))
        params.append(np.array(p))
    return grads, params


@pytest.mark.parametrize("case", DPSGD_CASES)
def test_dpsgd_with_a_seed_is_fluids_update(case):
    want = ORACLE[case]
    args = want["args"]
    grads, params = train_dpsgd(len(want["params"]), **args)
    for step, (g, p) in enumerate(zip(want["grads"], want["params"])):
        np.testing.assert_allclose(grads[step], g, rtol=2e-5, atol=1e-6, err_msg=f"step {step}")
        np.testing.assert_allclose(params[step], p, rtol=2e-5, atol=1e-6, err_msg=f"step {step}")


def test_dpsgd_noise_is_fluids_number_for_the_seed():
    # recover fluid's noise from its first update, where no clipping applies (clip=10 > norm)
    want = ORACLE["dpsgd/5_10_16_1"]
    args, w0 = want["args"], np.arange(6, dtype="float32").reshape(3, 2) / 10
    lr, bs = args["learning_rate"], args["batch_size"]
    implied = ((w0 - want["params"][0]) / lr - want["grads"][0]) * bs
    np.testing.assert_allclose(implied, fluid_dpsgd_noise(5, 1.0), atol=2e-5)


def test_dpsgd_without_a_seed_draws_fresh_gaussian_noise_each_step():
    # zero input: zero gradient, so each step moves every element by -lr * noise / batch_size
    lr, bs, sigma, steps = 0.5, 2.0, 3.0, 400
    _, params = train_dpsgd(steps, np.zeros((2, 3), "float32"), None, 1.0, bs, sigma, lr)
    w = np.stack([np.arange(6, dtype="float32").reshape(3, 2) / 10] + params)
    moves = (w[:-1] - w[1:]).reshape(steps, -1) * bs / lr
    np.testing.assert_allclose(moves, moves[:, :1].repeat(6, axis=1), atol=1e-4)  # one number
    noise = moves[:, 0]
    assert abs(noise.mean()) < 4 * sigma / np.sqrt(steps)
    assert 0.85 * sigma < noise.std() < 1.15 * sigma
    assert len(np.unique(noise.round(5))) > steps * 0.9  # fresh each step


def test_dpsgd_without_noise_is_fluids_clipped_sgd():
    want = ORACLE["dpsgd/123_1_1_0"]
    args = dict(want["args"], seed=None)
    _, params = train_dpsgd(len(want["params"]), **args)
    np.testing.assert_allclose(params, want["params"], rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs, match", [
    ({"clip": 0.0}, "clip > 0"), ({"batch_size": -1.0}, "batch_size > 0"),
    ({"sigma": "1"}, "sigma must be a float"), ({"seed": -3}, "seed must be None or an int"),
])
def test_dpsgd_bad_arguments_are_named(kwargs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        OPT.DpsgdOptimizer(learning_rate=0.1, **kwargs)


# -- refused ---------------------------------------------------------------------------------
def test_dgc_is_refused_with_momentum_named_as_fluids_cpu_build_refuses_it():
    kind, text = ORACLE["dgc/cpu"]["raises"]
    assert kind == "AssertionError" and "GPU" in text
    with pytest.raises(PreconditionError, match="MomentumOptimizer") as info:
        OPT.DGCMomentumOptimizer(learning_rate=0.1, momentum=0.9, rampup_begin_step=0)
    assert "not available in spmd" in str(info.value)


def test_pipeline_is_refused_with_data_parallel_named():
    assert ORACLE["pipeline/cpu"]["raises"] is None  # fluid builds it; spmd cannot run it
    with pytest.raises(PreconditionError, match="with_data_parallel") as info:
        OPT.PipelineOptimizer(OPT.SGD(0.1), cut_list=[], place_list=[fluid.CPUPlace()])
    assert "SGDOptimizer" in str(info.value)


def test_every_fluid_optimizer_name_exists():
    missing = [n for n in ORACLE["all_names"] if not hasattr(OPT, n)]
    assert missing == []
    assert set(ORACLE["all_names"]) <= set(OPT.__all__)
