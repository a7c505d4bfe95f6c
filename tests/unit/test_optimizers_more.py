"""The fluid 1.8 optimizers beyond SGD/Momentum/Adam, their update ops, regularizers, clipping
in every spelling, Lookahead, ExponentialMovingAverage and ModelAverage, against real fluid:
tests/oracle/make_optim.py ran the same ops and the same tiny network (same initial
parameters, same batches, 3 steps) in PaddlePaddle 1.8.5 and stored the results in
tests/oracle/data/optim.json."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from oracle_io import load

import spmd as paddle
import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError
from spmd.kernels.registry import run_kernel
from spmd.ops import get_op_def
from spmd.passes.common import trained_params_grads
from spmd.passes.reduce_mode import apply_reduce_mode

ORACLE = load("optim")
OP_CASES = sorted(k[3:] for k in ORACLE if k.startswith("op/"))


def _op_type(case_name: str) -> str:
    for prefix in ("ftrl", "average_accumulates", "rmsprop"):
        if case_name.startswith(prefix):
            return prefix
    return case_name


@pytest.mark.parametrize("name", OP_CASES)
def test_update_kernel_equals_fluid_op(name):
    """The raw kernel on the inputs fluid 1.8.5's op got (float32), output by output."""
    case = ORACLE["op/" + name]
    op = _op_type(name)
    attrs = get_op_def(op).validate_attrs(dict(case["attrs"]), op)
    got = run_kernel(op, np, case["inputs"], attrs, frozenset(case["outputs"]))
    for slot, want in case["outputs"].items():
        assert got[slot].dtype == want.dtype, slot
        np.testing.assert_allclose(got[slot], want, rtol=2e-6, atol=1e-7, err_msg=slot)


def _net(init, error_clip=None):
    x = fluid.data("x", [None, 4], "float32")
    y = fluid.data("y", [None, 2], "float32")
    attrs = {n: fluid.ParamAttr(name=n) for n in init}  # values set after startup (_start)
    h = fluid.layers.fc(x, 5, act="tanh", param_attr=attrs["fc_0.w_0"],
                        bias_attr=attrs["fc_0.b_0"])
    if error_clip is not None:
        h.error_clip = error_clip
    out = fluid.layers.fc(h, 2, param_attr=attrs["fc_1.w_0"], bias_attr=attrs["fc_1.b_0"])
    return fluid.layers.mean(fluid.layers.square_error_cost(out, y))


def _start(exe, startup, scope, init):
    """Run the startup program, then give the parameters fluid's initial values (and
    Lookahead's slow copies, which the startup program copied from the parameters)."""
    exe.run(startup, scope=scope)
    for name, value in init.items():
        for var in (name, name + "@SLOW"):
            if scope.find_var(var) is not None:
                scope.find_var(var).get_tensor().set(value, fluid.CPUPlace())


def _data():
    """make_optim.net_data: the same RandomState draws in the same order."""
    rng = np.random.RandomState(7)

    def rand(*shape):
        return rng.uniform(-1.0, 1.0, size=shape).astype("float32")

    init = {"fc_0.w_0": rand(4, 5), "fc_0.b_0": rand(5), "fc_1.w_0": rand(5, 2),
            "fc_1.b_0": rand(2)}
    return init, [(rand(6, 4), rand(6, 2)) for _ in range(3)]


def train(make_opt, error_clip=None, lr_fn=None, before=None, after=None):
    init, batches = _data()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _net(init, error_clip)
        lr = lr_fn() if lr_fn is not None else 0.1
        if before is not None:
            before(main)
        make_opt(lr).minimize(loss)
        extra = after() if after is not None else None
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    result, lrs = {}, []
    with fluid.scope_guard(scope):
        _start(exe, startup, scope, init)
        for x, y in batches:
            fetch = [loss] + ([lr] if isinstance(lr, fluid.Variable) else [])
            got = exe.run(main, feed={"x": x, "y": y}, fetch_list=fetch)
            lrs.extend(np.array(g) for g in got[1:])
        result["params"] = {n: np.array(scope.find_var(n).get_tensor()) for n in init}
        if lrs:
            result["lrs"] = np.concatenate(lrs)
        if extra is not None:
            with extra.apply(exe, need_restore=True):
                result["applied"] = {n: np.array(scope.find_var(n).get_tensor()) for n in init}
            result["restored"] = {n: np.array(scope.find_var(n).get_tensor()) for n in init}
    return result


def _ema(thres=False):
    step = None
    if thres:
        step = fluid.layers.cast(fluid.layers.autoincreased_step_counter(
            counter_name="@THRES@", begin=1), "float32")
    ema = fluid.optimizer.ExponentialMovingAverage(0.999 if thres else 0.9, thres_steps=step)
    ema.update()
    return ema


OPT = fluid.optimizer
TRAIN = {
    "adagrad": dict(make_opt=lambda lr: OPT.Adagrad(lr, initial_accumulator_value=0.1)),
    "decayed_adagrad": dict(make_opt=lambda lr: OPT.DecayedAdagrad(lr, decay=0.9)),
    "rmsprop": dict(make_opt=lambda lr: OPT.RMSProp(lr)),
    "rmsprop_centered": dict(make_opt=lambda lr: OPT.RMSPropOptimizer(lr, momentum=0.5,
                                                                      centered=True)),
    "adadelta": dict(make_opt=lambda lr: OPT.Adadelta(lr, rho=0.9)),
    "adamax": dict(make_opt=lambda lr: OPT.Adamax(lr)),
    "ftrl": dict(make_opt=lambda lr: OPT.Ftrl(lr, l1=0.01, l2=0.02)),
    "lamb": dict(make_opt=lambda lr: OPT.Lamb(
        lr, exclude_from_weight_decay_fn=lambda p: p.name.endswith(".b_0"))),
    "lars": dict(make_opt=lambda lr: OPT.LarsMomentum(lr, momentum=0.9)),
    "lookahead": dict(make_opt=lambda lr: OPT.LookaheadOptimizer(OPT.SGD(lr), alpha=0.5, k=2)),
    "l1_l2": dict(make_opt=lambda lr: OPT.SGD(lr, regularization=fluid.regularizer.L2Decay(0.1))),
    "clip_value": dict(make_opt=lambda lr: OPT.SGD(
        lr, grad_clip=fluid.clip.GradientClipByValue(0.05))),
    "clip_norm": dict(make_opt=lambda lr: OPT.Momentum(
        lr, 0.9, grad_clip=fluid.clip.GradientClipByNorm(0.1))),
    "clip_global": dict(make_opt=lambda lr: OPT.Adam(
        lr, grad_clip=fluid.clip.GradientClipByGlobalNorm(0.1))),
    "set_gradient_clip": dict(make_opt=lambda lr: OPT.SGD(lr), before=lambda main:
                              fluid.clip.set_gradient_clip(
                                  fluid.clip.GradientClipByGlobalNorm(0.1), program=main)),
    "error_clip": dict(make_opt=lambda lr: OPT.SGD(lr),
                       error_clip=fluid.clip.ErrorClipByValue(0.01)),
    "ema": dict(make_opt=lambda lr: OPT.SGD(lr), after=_ema),
    "ema_thres": dict(make_opt=lambda lr: OPT.SGD(lr), after=lambda: _ema(thres=True)),
    "model_average": dict(make_opt=lambda lr: OPT.SGD(lr), after=lambda: OPT.ModelAverage(
        0.5, min_average_window=1, max_average_window=2)),
}


def _compare(got, want, tol=2e-5):
    for key in ("params", "applied", "restored"):
        assert (key in got) == (key in want), key
        for name, value in want.get(key, {}).items():
            np.testing.assert_allclose(got[key][name], value, rtol=tol, atol=tol,
                                       err_msg=f"{key} {name}")


@pytest.mark.filterwarnings("ignore:Caution")
@pytest.mark.parametrize("name", sorted(TRAIN))
def test_three_steps_equal_fluid(name):
    _compare(train(**TRAIN[name]), ORACLE["train/" + name])


def test_param_attr_regularizer_wins_over_the_optimizers():
    """L1Decay on fc_0.w_0 through ParamAttr, the optimizer's L2Decay on the others."""
    init, batches = _data()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        y = fluid.data("y", [None, 2], "float32")
        attrs = {n: fluid.ParamAttr(name=n) for n in init}
        attrs["fc_0.w_0"] = fluid.ParamAttr(name="fc_0.w_0",
                                            regularizer=fluid.regularizer.L1Decay(0.05))
        h = fluid.layers.fc(x, 5, act="tanh", param_attr=attrs["fc_0.w_0"],
                            bias_attr=attrs["fc_0.b_0"])
        out = fluid.layers.fc(h, 2, param_attr=attrs["fc_1.w_0"], bias_attr=attrs["fc_1.b_0"])
        loss = fluid.layers.mean(fluid.layers.square_error_cost(out, y))
        fluid.optimizer.SGD(0.1, regularization=fluid.regularizer.L2Decay(0.1)).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    _start(exe, startup, scope, init)
    for xb, yb in batches:
        exe.run(main, feed={"x": xb, "y": yb}, scope=scope)
    got = {"params": {n: np.array(scope.find_var(n).get_tensor()) for n in init}}
    _compare(got, ORACLE["train/param_attr_l1"])


def test_schedule_drives_sgd_as_in_fluid():
    got = train(lambda lr: fluid.optimizer.SGD(lr),
                lr_fn=lambda: fluid.layers.exponential_decay(0.5, 1, 0.5))
    want = ORACLE["lr/sgd_exponential"]
    np.testing.assert_allclose(got["lrs"], want["lrs"], rtol=1e-6)
    _compare(got, want)


def test_model_average_apply_without_restore_keeps_the_average():
    init, batches = _data()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _net(init)
        fluid.optimizer.SGD(0.1).minimize(loss)
        avg = fluid.optimizer.ModelAverage(0.5, min_average_window=1, max_average_window=2)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        _start(exe, startup, scope, init)
        for x, y in batches:
            exe.run(main, feed={"x": x, "y": y})
        with avg.apply(exe, need_restore=False):
            pass
        kept = np.array(scope.find_var("fc_1.b_0").get_tensor())
        avg.restore(exe)
        restored = np.array(scope.find_var("fc_1.b_0").get_tensor())
    want = ORACLE["train/model_average"]
    np.testing.assert_allclose(kept, want["applied"]["fc_1.b_0"], rtol=2e-5)
    np.testing.assert_allclose(restored, want["params"]["fc_1.b_0"], rtol=2e-5)


@pytest.mark.parametrize("make, message", [
    (lambda: fluid.optimizer.Adagrad(0.1, epsilon="small"), "epsilon must be a float"),
    (lambda: fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.1), alpha=1.5),
     "alpha should be larger"),
    (lambda: fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.1), k=0), "positive"),
    (lambda: fluid.optimizer.Lamb(0.1, exclude_from_weight_decay_fn=3), "function"),
    (lambda: fluid.clip.ErrorClipByValue(max=-1.0, min=1.0), "must be <="),
    (lambda: fluid.clip.set_gradient_clip("clip"), "GradientClipByGlobalNorm"),
])
def test_bad_arguments_name_the_argument(make, message):
    with pytest.raises(InvalidArgumentError, match=message):
        make()


def _tiny(make_opt, zero_loss=False):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 16], "float32")
        h = fluid.layers.fc(fluid.layers.fc(x, 8, act="tanh"), 2)
        loss = fluid.layers.mean(h)
        if zero_loss:
            loss = fluid.layers.scale(loss, scale=0.0)
        _, params_grads = make_opt().minimize(loss)
    return main, startup, params_grads


@pytest.mark.parametrize("name, make, chunked", [
    ("adagrad", lambda: fluid.optimizer.Adagrad(0.1), True),
    ("rmsprop", lambda: fluid.optimizer.RMSProp(0.1, centered=True), True),
    ("adamax", lambda: fluid.optimizer.Adamax(0.1), True),
    ("ftrl", lambda: fluid.optimizer.Ftrl(0.1), True),
    ("adadelta", lambda: fluid.optimizer.Adadelta(0.1), True),
    ("adamw", lambda: paddle.optimizer.AdamW(0.1), True),
    ("nadam", lambda: paddle.optimizer.NAdam(0.1), True),
    ("lamb", lambda: fluid.optimizer.Lamb(0.1), False),
    ("lars", lambda: fluid.optimizer.LarsMomentum(0.1, 0.9), False),
])
def test_reduce_mode_cuts_only_row_separable_update_chains(name, make, chunked):
    """Lamb and LarsMomentum scale by norms of the whole parameter: Reduce mode must not cut
    the large fc_0.w_0 into row chunks for them (the others are elementwise)."""
    main, _, _ = _tiny(make)
    layout = apply_reduce_mode(main, trained_params_grads(main), 2, fuse_broadcast=False)
    assert (layout.shards["fc_0.w_0"][0].rows is not None) == chunked, name


def test_adamw_decays_decoupled_from_the_gradient():
    """With a zero gradient adam moves nothing, so AdamW leaves param * (1 - lr * coeff), for
    the parameters apply_decay_param_fun accepts (here the weights, not the biases)."""
    main, startup, _ = _tiny(lambda: paddle.optimizer.AdamW(
        0.1, weight_decay=0.5, apply_decay_param_fun=lambda n: n.endswith("w_0")),
        zero_loss=True)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    before = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.all_parameters()}
    exe.run(main, feed={"x": np.ones((2, 16), "float32")}, scope=scope)
    for name, value in before.items():
        factor = 1 - 0.1 * 0.5 if name.endswith("w_0") else 1.0
        np.testing.assert_allclose(np.array(scope.find_var(name).get_tensor()), value * factor,
                                   rtol=1e-6, err_msg=name)


def test_paddle2_names_take_parameters_and_weight_decay():
    """paddle.optimizer.Adagrad(weight_decay=c) is fluid's Adagrad with L2Decay(c)."""
    def run(make):
        main, startup, _ = _tiny(make)
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(startup, scope=scope)
        exe.run(main, feed={"x": np.ones((2, 16), "float32")}, scope=scope)
        return np.array(scope.find_var("fc_0.w_0").get_tensor())

    a = run(lambda: paddle.optimizer.Adagrad(0.1, weight_decay=0.01))
    b = run(lambda: fluid.optimizer.Adagrad(0.1, regularization=fluid.regularizer.L2Decay(0.01)))
    np.testing.assert_array_equal(a, b)
    for cls in (paddle.optimizer.RMSProp, paddle.optimizer.Adadelta, paddle.optimizer.Adamax):
        cls(learning_rate=0.1, parameters=None, weight_decay=paddle.regularizer.L1Decay(0.1))
    with pytest.raises(InvalidArgumentError, match="learning_rate is required"):
        paddle.optimizer.Adagrad()
    with pytest.raises(InvalidArgumentError, match="unexpected keyword argument 'regularization'"):
        paddle.optimizer.RMSProp(0.1, regularization=None)


def test_a_backward_callback_spmd_does_not_run_warns_once():
    calls = []

    def my_callback(block, context):
        calls.append(block)

    for _ in range(2):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.data("x", [-1, 3], "float32")
            loss = fluid.layers.mean(fluid.layers.fc(x, 2))
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                fluid.optimizer.SGD(0.1).backward(
                    loss, callbacks=[my_callback, fluid.clip.error_clip_callback])
        messages = [str(w.message) for w in seen if "callback" in str(w.message)]
        assert messages == ([] if _ else [  # once, and none for error_clip_callback
            "append_backward: spmd does not call backward callbacks; my_callback is not run "
            "(error clips, fluid's error_clip_callback, are applied without it)"])
    assert calls == []
