"""Optimizers end to end: a small float64 model (parameters made by block.create_parameter,
initialized by running a startup program), a few minimize steps, against hand-written numpy
updates; regularization, clipping, learning rates, roles, state map and names."""
from __future__ import annotations

import numpy as np
import pytest

import spmd
from spmd.core import CPUPlace, OpRole, Program, Scope, program_guard, unique_name
from spmd.errors import InvalidArgumentError
from spmd.optimizer import fluid_names as F
from spmd.optimizer import paddle_names as P

RNG = np.random.default_rng(7)
N, D_IN, D_HID = 4, 3, 5
STEPS = 3
PARAMS = ("b1", "w1", "w2")
INIT = {"w1": RNG.uniform(-1, 1, (D_IN, D_HID)), "b1": RNG.uniform(-1, 1, (D_HID,)),
        "w2": RNG.uniform(-1, 1, (D_HID, 1))}
XS = [RNG.uniform(-1, 1, (N, D_IN)) for _ in range(STEPS)]


# -- the model: loss = mean((x @ w1 + b1) @ w2) ------------------------------------------------

def build(make_opt, param_kwargs=None, lr_var=None, **minimize_kwargs):
    """Main and startup programs of the model with `make_opt()`'s minimize applied
    (`make_opt(var)` with the Variable `lr_var(block, startup_block)` makes, when given).
    Returns (main, startup, optimize_ops, params_grads, optimizer)."""
    main, startup = Program(), Program()
    param_kwargs = param_kwargs or {}
    with unique_name.guard(), program_guard(main, startup):
        block, sblock = main.global_block(), startup.global_block()
        x = block.create_var(name="x", shape=(N, D_IN), dtype="float64", is_data=True,
                             stop_gradient=True)
        params = {}
        for name in ("w1", "b1", "w2"):
            params[name] = block.create_parameter(name, INIT[name].shape, "float64",
                                                  **param_kwargs.get(name, {}))
            # initialized from a feed, so the values are random yet known to the test
            src = sblock.create_var(name=f"init_{name}", shape=INIT[name].shape,
                                    dtype="float64", is_data=True)
            sblock.create_var(name=name, shape=INIT[name].shape, dtype="float64",
                              persistable=True)
            sblock.append_op("assign", {"X": [src]}, {"Out": [name]})
        h = block.create_var(name="h")
        block.append_op("mul", {"X": [x], "Y": [params["w1"]]}, {"Out": [h]})
        hb = block.create_var(name="hb")
        block.append_op("elementwise_add", {"X": [h], "Y": [params["b1"]]}, {"Out": [hb]},
                        {"axis": 1})
        out = block.create_var(name="out")
        block.append_op("mul", {"X": [hb], "Y": [params["w2"]]}, {"Out": [out]})
        loss = block.create_var(name="loss")
        block.append_op("mean", {"X": [out]}, {"Out": [loss]})
        opt = make_opt(lr_var(block, sblock)) if lr_var is not None else make_opt()
        ops, params_grads = opt.minimize(loss, **minimize_kwargs)
    return main, startup, ops, params_grads, opt


def train(main, startup, feeds=None):
    """Run the startup program, then one main-program step per batch of XS; return the
    parameters' values."""
    exe, scope = spmd.Executor(CPUPlace()), Scope()
    exe.run(startup, feed={f"init_{k}": v for k, v in INIT.items()}, scope=scope)
    for i, x in enumerate(XS):
        feed = {"x": x}
        feed.update((feeds or [{}] * STEPS)[i])
        exe.run(main, feed=feed, scope=scope)
    return {k: np.array(scope.find_var(k).get_tensor()) for k in PARAMS}, scope


def np_grads(p, x):
    dout = np.full((x.shape[0], 1), 1.0 / x.shape[0])
    dh = dout @ p["w2"].T
    return {"w1": x.T @ dh, "b1": dh.sum(0), "w2": (x @ p["w1"] + p["b1"]).T @ dout}


LR32 = float(np.float32(0.1))  # the learning rate variable is float32, as in fluid


def reference(update, transform=None, lrs=None):
    """Numpy training: per step grads -> transform(params, grads) -> update(name, p, g, lr,
    state)."""
    p = {k: v.copy() for k, v in INIT.items()}
    state = {k: {} for k in PARAMS}
    for i, x in enumerate(XS):
        g = np_grads(p, x)
        if transform is not None:
            g = transform(p, g)
        for k in PARAMS:
            lr = LR32 if lrs is None else lrs[i]
            p[k] = update(k, p[k], g[k], lr, state[k])
    return p


def sgd_update(k, p, g, lr, st):
    return p - lr * g


def momentum_update(mu, nesterov=False):
    def update(k, p, g, lr, st):
        v = mu * st.get("v", 0.0) + g
        st["v"] = v
        return p - (g + mu * v) * lr if nesterov else p - lr * v
    return update


def adam_update(beta1=0.9, beta2=0.999, eps=1e-8, pow_init=None):
    def update(k, p, g, lr, st):
        b1p, b2p = st.get("b1p", pow_init or beta1), st.get("b2p", beta2)
        m1 = beta1 * st.get("m1", 0.0) + (1 - beta1) * g
        m2 = beta2 * st.get("m2", 0.0) + (1 - beta2) * g * g
        lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
        st.update(m1=m1, m2=m2, b1p=b1p * beta1, b2p=b2p * beta2)
        return p - lr_t * m1 / (np.sqrt(m2) + eps)
    return update


def assert_params(got, want):
    for k in PARAMS:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-11, atol=1e-13, err_msg=k)


def assert_moved(got):
    """A guard that the reference is not trivially the initial values."""
    assert any(not np.allclose(got[k], INIT[k]) for k in PARAMS)


# -- the optimizers --------------------------------------------------------------------------

OPTIMIZERS = [
    ("fluid_sgd", lambda: F.SGD(learning_rate=0.1), sgd_update),
    ("fluid_SGDOptimizer", lambda: F.SGDOptimizer(0.1), sgd_update),
    ("paddle_sgd", lambda: P.SGD(learning_rate=0.1), sgd_update),
    ("fluid_momentum", lambda: F.Momentum(0.1, momentum=0.9), momentum_update(0.9)),
    ("fluid_momentum_nesterov", lambda: F.MomentumOptimizer(0.1, 0.8, use_nesterov=True),
     momentum_update(0.8, nesterov=True)),
    ("paddle_momentum_default_mu", lambda: P.Momentum(learning_rate=0.1), momentum_update(0.9)),
    ("paddle_momentum_nesterov", lambda: P.Momentum(0.1, momentum=0.7, use_nesterov=True),
     momentum_update(0.7, nesterov=True)),
    ("fluid_adam", lambda: F.Adam(learning_rate=0.1), adam_update()),
    ("fluid_adam_attrs", lambda: F.AdamOptimizer(0.1, beta1=0.8, beta2=0.99, epsilon=1e-3,
                                                 lazy_mode=True),
     adam_update(0.8, 0.99, 1e-3)),
    ("paddle_adam", lambda: P.Adam(learning_rate=0.1, epsilon=1e-6), adam_update(eps=1e-6)),
]


@pytest.mark.parametrize("name, make_opt, update", OPTIMIZERS, ids=[o[0] for o in OPTIMIZERS])
def test_optimizer_steps_match_numpy(name, make_opt, update):
    main, startup, ops, params_grads, _ = build(make_opt)
    got, _ = train(main, startup)
    want = reference(update)
    assert_moved(want)
    assert_params(got, want)
    assert {p.name for p, _ in params_grads} == set(PARAMS)
    assert len(ops) == 3 and {op.input("Param")[0] for op in ops} == set(PARAMS)


def test_adam_beta_as_variable_follows_fluid():
    """fluid 1.8: Beta1Tensor feeds the op, and the beta powers start at 0.9 / 0.999."""
    def make(beta_var):
        return F.Adam(learning_rate=0.1, beta1=beta_var)

    def beta_var(block, sblock):
        v = block.create_var(name="beta1_var", shape=(1,), dtype="float64", persistable=True)
        sblock.create_var(name="beta1_var", shape=(1,), dtype="float64", persistable=True)
        sblock.append_op("fill_constant", outputs={"Out": ["beta1_var"]},
                         attrs={"shape": [1], "value": 0.8, "dtype": "float64"})
        return v

    main, startup, ops, _, _ = build(make, lr_var=beta_var)
    assert all(op.input("Beta1Tensor") == ["beta1_var"] for op in ops)
    got, _ = train(main, startup)
    assert_params(got, reference(adam_update(beta1=0.8, pow_init=0.9)))


# -- learning rates ----------------------------------------------------------------------------

def test_learning_rate_variable_fed_per_step():
    lrs = [0.1, 0.05, 0.2]

    def lr_var(block, sblock):
        return block.create_var(name="my_lr", shape=(1,), dtype="float64", is_data=True)

    main, startup, ops, _, _ = build(lambda lr: F.Momentum(lr, momentum=0.9), lr_var=lr_var)
    assert all(op.input("LearningRate") == ["my_lr"] for op in ops)
    assert not any(n.startswith("learning_rate") for n in main.global_block().vars)
    got, _ = train(main, startup, feeds=[{"my_lr": np.array([v])} for v in lrs])
    assert_params(got, reference(momentum_update(0.9), lrs=lrs))


def test_float_learning_rate_is_persistable_and_set_by_startup():
    main, startup, ops, _, _ = build(lambda: F.SGD(0.1))
    lr = main.global_block().var("learning_rate_0")
    assert lr.persistable and lr.shape == (1,) and lr.dtype == "float32"
    fills = [op for op in startup.global_block().ops if op.output("Out") == ["learning_rate_0"]]
    assert len(fills) == 1 and fills[0].type == "fill_constant"
    assert fills[0].attr("value") == pytest.approx(0.1)
    _, scope = train(main, startup)
    assert np.array(scope.find_var("learning_rate_0").get_tensor()).tolist() == [LR32]


def test_per_parameter_learning_rate_multiplier():
    main, startup, ops, _, _ = build(lambda: F.SGD(0.1),
                                     param_kwargs={"w1": {"learning_rate": 0.5}})
    scales = [op for op in main.global_block().ops
              if op.type == "scale" and op.input("X") == ["learning_rate_0"]]
    assert len(scales) == 1 and scales[0].attr("scale") == 0.5
    got, _ = train(main, startup)
    want = reference(lambda k, p, g, lr, st: p - (lr * 0.5 if k == "w1" else lr) * g)
    assert_params(got, want)


def test_learning_rate_errors():
    with pytest.raises(InvalidArgumentError, match="learning_rate must be a float, a Variable"):
        F.SGD(learning_rate="0.1")
    other = Program().global_block().create_var(name="lr", shape=(1,), dtype="float32")
    with pytest.raises(InvalidArgumentError, match="belongs to another Program"):
        build(lambda: F.SGD(other))

    def wide(block, sblock):
        return block.create_var(name="lr2", shape=(2,), dtype="float32", persistable=True)
    with pytest.raises(InvalidArgumentError, match=r"must hold one float \(shape \[1\]\)"):
        build(lambda lr: F.SGD(lr), lr_var=wide)


# -- regularization ----------------------------------------------------------------------------

def l2(coeff):
    return lambda p, g: {k: g[k] + coeff * p[k] for k in PARAMS}


@pytest.mark.parametrize("make_opt", [
    lambda: F.SGD(0.1, regularization=F.L2Decay(0.05)),
    lambda: F.SGD(0.1, regularization=F.L2DecayRegularizer(regularization_coeff=0.05)),
    lambda: P.SGD(learning_rate=0.1, weight_decay=0.05),
    lambda: P.SGD(learning_rate=0.1, weight_decay=P.L2Decay(coeff=0.05)),
], ids=["fluid_L2Decay", "fluid_L2DecayRegularizer", "paddle_float", "paddle_L2Decay"])
def test_l2_decay(make_opt):
    main, startup, _, _, _ = build(make_opt)
    got, _ = train(main, startup)
    assert_params(got, reference(sgd_update, l2(0.05)))


def test_l1_decay_with_adam():
    main, startup, _, _, _ = build(lambda: P.Adam(0.1, weight_decay=P.L1Decay(0.05)))
    got, _ = train(main, startup)
    assert_params(got, reference(adam_update(),
                                 lambda p, g: {k: g[k] + 0.05 * np.sign(p[k]) for k in PARAMS}))


def test_param_regularizer_overrides_optimizer_regularization():
    kwargs = {"w1": {"regularizer": F.L1DecayRegularizer(0.2)}}
    main, startup, _, _, _ = build(lambda: F.Momentum(0.1, 0.9, regularization=F.L2Decay(0.05)),
                                   param_kwargs=kwargs)
    got, _ = train(main, startup)

    def reg(p, g):
        out = {k: g[k] + 0.05 * p[k] for k in PARAMS}
        out["w1"] = g["w1"] + 0.2 * np.sign(p["w1"])
        return out

    assert_params(got, reference(momentum_update(0.9), reg))


# -- clipping ----------------------------------------------------------------------------------

def clip_value(lo, hi):
    return lambda p, g: {k: np.clip(g[k], lo, hi) for k in PARAMS}


def clip_norm(c, skip=()):
    def f(p, g):
        return {k: g[k] if k in skip else g[k] * (c / max(np.linalg.norm(g[k]), c))
                for k in PARAMS}
    return f


def clip_global(c, skip=()):
    def f(p, g):
        norm = np.sqrt(sum(np.sum(g[k] ** 2) for k in PARAMS if k not in skip))
        return {k: g[k] if k in skip else g[k] * (c / max(norm, c)) for k in PARAMS}
    return f


CLIPS = [
    ("fluid_value", lambda: F.GradientClipByValue(max=0.05), clip_value(-0.05, 0.05)),
    ("paddle_value_min", lambda: P.ClipGradByValue(max=0.1, min=-0.02), clip_value(-0.02, 0.1)),
    ("fluid_norm", lambda: F.GradientClipByNorm(clip_norm=0.1), clip_norm(0.1)),
    ("paddle_norm", lambda: P.ClipGradByNorm(0.1), clip_norm(0.1)),
    ("fluid_global", lambda: F.GradientClipByGlobalNorm(clip_norm=0.2), clip_global(0.2)),
    ("paddle_global", lambda: P.ClipGradByGlobalNorm(0.2), clip_global(0.2)),
    ("global_not_binding", lambda: F.GradientClipByGlobalNorm(100.0), clip_global(100.0)),
]


@pytest.mark.parametrize("name, make_clip, transform", CLIPS, ids=[c[0] for c in CLIPS])
def test_clip(name, make_clip, transform):
    main, startup, _, _, _ = build(lambda: F.SGD(0.1, grad_clip=make_clip()))
    got, _ = train(main, startup)
    want = reference(sgd_update, transform)
    if name != "global_not_binding":  # the threshold must really bind for the test to mean much
        assert not np.allclose(want["w1"], reference(sgd_update)["w1"])
    assert_params(got, want)


@pytest.mark.parametrize("make_clip, transform", [
    (lambda: F.GradientClipByGlobalNorm(0.2), clip_global(0.2, skip=("w2",))),
    (lambda: F.GradientClipByNorm(0.1), clip_norm(0.1, skip=("w2",))),
], ids=["global", "norm"])
def test_need_clip_false_is_skipped(make_clip, transform):
    main, startup, _, _, _ = build(lambda: P.Momentum(0.1, grad_clip=make_clip()),
                                   param_kwargs={"w2": {"need_clip": False}})
    got, _ = train(main, startup)
    assert_params(got, reference(momentum_update(0.9), transform))


def test_fluid_need_clip_callable():
    clip = F.GradientClipByGlobalNorm(0.2, need_clip=lambda p: p.name != "w2")
    main, startup, _, _, _ = build(lambda: F.SGD(0.1, grad_clip=clip))
    got, _ = train(main, startup)
    assert_params(got, reference(sgd_update, clip_global(0.2, skip=("w2",))))


def test_clip_happens_before_regularization_as_in_fluid():
    main, startup, _, _, _ = build(lambda: P.Adam(0.1, weight_decay=0.5,
                                                  grad_clip=P.ClipGradByGlobalNorm(0.2)))
    got, _ = train(main, startup)
    clip_then_decay = reference(adam_update(), lambda p, g: l2(0.5)(p, clip_global(0.2)(p, g)))
    decay_then_clip = reference(adam_update(), lambda p, g: clip_global(0.2)(p, l2(0.5)(p, g)))
    assert not np.allclose(clip_then_decay["w1"], decay_then_clip["w1"])
    assert_params(got, clip_then_decay)


def test_clip_and_regularizer_argument_errors():
    with pytest.raises(InvalidArgumentError, match="grad_clip must be"):
        F.SGD(0.1, grad_clip=1.0)
    with pytest.raises(InvalidArgumentError, match="expected a regularizer"):
        F.SGD(0.1, regularization=0.1)
    with pytest.raises(InvalidArgumentError, match="weight_decay must be"):
        P.SGD(0.1, weight_decay="0.1")
    with pytest.raises(InvalidArgumentError, match="min .* must be <= max"):
        F.GradientClipByValue(max=-1.0, min=0.0)
    with pytest.raises(InvalidArgumentError, match="clip_norm must be > 0"):
        P.ClipGradByGlobalNorm(0.0)


# -- program structure -------------------------------------------------------------------------

def test_optimize_ops_carry_optimize_role():
    opt = P.Adam(0.1, weight_decay=0.01, grad_clip=P.ClipGradByGlobalNorm(1.0))
    main, startup = Program(), Program()
    with unique_name.guard(), program_guard(main, startup):
        block = main.global_block()
        x = block.create_var(name="x", shape=(N, D_IN), dtype="float64", is_data=True)
        w = block.create_parameter("w", (D_IN, 1), "float64")
        out, loss = block.create_var(name="out"), block.create_var(name="loss")
        block.append_op("mul", {"X": [x], "Y": [w]}, {"Out": [out]})
        block.append_op("mean", {"X": [out]}, {"Out": [loss]})
        params_grads = opt.backward(loss)
        n = len(block.ops)
        ops = opt.apply_optimize(loss, startup, params_grads)
    appended = block.ops[n:]
    assert {op.type for op in appended} >= {"adam", "squared_l2_norm", "sqrt", "elementwise_mul",
                                            "scale", "sum"}
    assert all(op.role is OpRole.OPTIMIZE for op in appended), [
        (op.type, op.role) for op in appended if op.role is not OpRole.OPTIMIZE]
    assert all(op.role is not OpRole.OPTIMIZE for op in block.ops[:n])
    assert [op.type for op in ops] == ["adam"]


def test_minimize_roles_and_raw_params_grads():
    main, _, ops, params_grads, _ = build(lambda: F.SGD(0.1, grad_clip=F.GradientClipByNorm(1.)))
    roles = [op.role for op in main.global_block().ops]
    first_opt = roles.index(OpRole.OPTIMIZE)
    assert all(r is OpRole.OPTIMIZE for r in roles[first_opt:])
    assert all(op.role is OpRole.OPTIMIZE for op in ops)
    for p, g in params_grads:  # the raw gradients, as in fluid, recorded in grad_var_map
        assert main.grad_var_map[p.name] == g.name
        clipped = [op for op in ops if op.input("Param") == [p.name]][0].input("Grad")[0]
        assert clipped != g.name


def test_optimizer_state_map():
    main, startup, ops, _, _ = build(lambda: F.Adam(0.1))
    state = main.optimizer_state
    assert state["w1"] == ["w1_moment1_0", "w1_moment2_0", "w1_beta1_pow_acc_0",
                           "w1_beta2_pow_acc_0"]
    assert set(state) == set(PARAMS)
    startup_fills = {op.output("Out")[0]: op for op in startup.global_block().ops
                     if op.type == "fill_constant"}
    for op in ops:
        param = op.input("Param")[0]
        accs = state[param]
        assert {op.input(s)[0] for s in ("Moment1", "Moment2", "Beta1Pow", "Beta2Pow")} \
            == set(accs)
        # state outputs are the same variables as the inputs: that is how state persists
        assert op.output("ParamOut") == [param]
        assert op.output("Moment1Out") == op.input("Moment1")
        assert op.output("Beta2PowOut") == op.input("Beta2Pow")
        for name in accs:
            assert main.global_block().var(name).persistable
            assert name in startup_fills
    assert startup_fills["w1_beta1_pow_acc_0"].attr("value") == pytest.approx(0.9)
    assert startup.global_block().var("w1_moment1_0").shape == (D_IN, D_HID)


def test_sgd_and_momentum_state():
    sgd_main, *_ = build(lambda: F.SGD(0.1))
    assert sgd_main.optimizer_state == {k: [] for k in PARAMS}
    mom_main, *_ = build(lambda: F.Momentum(0.1, 0.9))
    assert mom_main.optimizer_state == {k: [f"{k}_velocity_0"] for k in PARAMS}


def test_names_are_deterministic_across_builds():
    a_main, a_start, *_ = build(lambda: P.Adam(0.1, weight_decay=0.1,
                                               grad_clip=P.ClipGradByGlobalNorm(1.0)))
    b_main, b_start, *_ = build(lambda: P.Adam(0.1, weight_decay=0.1,
                                               grad_clip=P.ClipGradByGlobalNorm(1.0)))
    assert list(a_main.global_block().vars) == list(b_main.global_block().vars)
    assert a_main.optimizer_state == b_main.optimizer_state
    assert a_main.fingerprint() == b_main.fingerprint()
    assert a_start.fingerprint() == b_start.fingerprint()


def test_named_optimizer_prefixes_accumulators():
    main, *_ = build(lambda: F.Momentum(0.1, 0.9, name="opt"))
    assert main.optimizer_state["w1"] == ["w1_opt_velocity_0"]


def test_minimize_twice_on_one_program_is_refused():
    main, startup, _, _, opt = build(lambda: F.Momentum(0.1, 0.9))
    loss = main.global_block().var("loss")
    with pytest.raises(InvalidArgumentError, match="minimize was called twice"):
        opt.minimize(loss, startup_program=startup)


@pytest.mark.parametrize("make_opt, kwargs", [
    (lambda: F.SGD(0.1, parameter_list=["w1", "w2"]), {}),
    (lambda: P.SGD(0.1, parameters=["w1", "w2"]), {}),
    (lambda: F.SGD(0.1), {"parameter_list": ["w1", "w2"]}),
    (lambda: P.SGD(0.1), {"parameters": ["w1", "w2"]}),
    (lambda: F.SGD(0.1), {"no_grad_set": {"b1"}}),
], ids=["fluid_ctor", "paddle_ctor", "fluid_minimize", "paddle_minimize", "no_grad_set"])
def test_parameter_list_and_no_grad_set(make_opt, kwargs):
    main, startup, ops, params_grads, _ = build(make_opt, **kwargs)
    assert sorted(p.name for p, _ in params_grads) == ["w1", "w2"]
    assert main.optimizer_state == {"w1": [], "w2": []}
    got, _ = train(main, startup)
    np.testing.assert_array_equal(got["b1"], INIT["b1"])
    want = reference(lambda k, p, g, lr, st: p if k == "b1" else p - lr * g)
    assert_params(got, want)


def test_get_lr():
    assert F.SGD(0.25).get_lr() == 0.25
    assert P.Adam().get_lr() == 0.001
