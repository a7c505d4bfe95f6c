"""Reference outputs of fluid 1.8.5 for the optimizers, their update ops and the learning-rate
schedules (tests/unit/test_optimizers_more.py, tests/unit/test_lr_schedules.py).

Three kinds of cases:
- "op/<name>": one update op run on fixed inputs (the raw kernel, outputs by slot);
- "train/<name>": a tiny network (fc 4->5 tanh, fc 5->2, mean squared error) with fixed initial
  parameters trained 3 steps on fixed batches with an optimizer; the parameters after the 3
  steps (and, for EMA / ModelAverage, the averaged ones inside apply());
- "lr/<name>": a schedule's value fetched at steps 0..7.

Run with the oracle's Python from outside the checkout:
    cd /tmp && /work/oracle185/bin/python /work/main/tests/oracle/make_optim.py
"""
import os
import sys

import numpy as np
import paddle
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

STEPS = 3


def rand(rng, *shape, low=-1.0, high=1.0):
    return rng.uniform(low, high, size=shape).astype("float32")


def run_op(op_type, inputs, attrs, outputs):
    """Run one op on `inputs` (name -> array) and fetch its `outputs` slots."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        ins = {}
        for slot, value in inputs.items():
            ins[slot] = block.create_var(name="in_" + slot, shape=value.shape,
                                         dtype=value.dtype)
        # fluid's update kernels insist on writing in place (ParamOut is Param, ...)
        names = {slot: _in_slot(slot, inputs) for slot in outputs}
        outs = {slot: ins[names[slot]] if names[slot] else
                block.create_var(name="out_" + slot, dtype=outputs[slot]) for slot in outputs}
        block.append_op(type=op_type, inputs=ins, outputs=outs, attrs=dict(attrs))
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"in_" + k: v for k, v in inputs.items()}
    fetch = ["in_" + names[s] if names[s] else "out_" + s for s in outputs]
    got = exe.run(main, feed=feed, fetch_list=fetch)
    return {"inputs": inputs, "attrs": attrs,
            "outputs": dict(zip(outputs, [np.array(g) for g in got]))}


def _in_slot(out_slot, inputs):
    """The input an output slot updates: ParamOut -> Param, out_sum_1 -> in_sum_1, ..."""
    for cand in (out_slot[:-3], "in_" + out_slot[4:], out_slot.replace("AccumOut", "Accumulator")):
        if cand in inputs:
            return cand
    return None


def op_cases():
    rng = np.random.RandomState(3)
    lr = np.array([0.1], dtype="float32")
    p, g = rand(rng, 3, 4), rand(rng, 3, 4)
    pos = rand(rng, 3, 4, low=0.1, high=0.6)
    pos2 = rand(rng, 3, 4, low=0.1, high=0.6)
    cases = {}
    cases["adagrad"] = run_op("adagrad", {"Param": p, "Grad": g, "Moment": pos,
                                          "LearningRate": lr}, {"epsilon": 1e-6},
                              {"ParamOut": "float32", "MomentOut": "float32"})
    cases["decayed_adagrad"] = run_op(
        "decayed_adagrad", {"Param": p, "Grad": g, "Moment": pos, "LearningRate": lr},
        {"epsilon": 1e-6, "decay": 0.9}, {"ParamOut": "float32", "MomentOut": "float32"})
    for centered in (False, True):
        mg = rand(rng, 3, 4, low=-0.2, high=0.2)
        cases["rmsprop_centered" if centered else "rmsprop"] = run_op(
            "rmsprop", {"Param": p, "Grad": g, "Moment": rand(rng, 3, 4), "MeanSquare": pos,
                        "MeanGrad": mg, "LearningRate": lr},
            {"epsilon": 1e-6, "decay": 0.9, "momentum": 0.5, "centered": centered},
            {"ParamOut": "float32", "MomentOut": "float32", "MeanSquareOut": "float32",
             "MeanGradOut": "float32"})
    cases["adadelta"] = run_op(
        "adadelta", {"Param": p, "Grad": g, "AvgSquaredGrad": pos, "AvgSquaredUpdate": pos2},
        {"epsilon": 1e-6, "rho": 0.9},
        {"ParamOut": "float32", "AvgSquaredGradOut": "float32",
         "AvgSquaredUpdateOut": "float32"})
    cases["adamax"] = run_op(
        "adamax", {"Param": p, "Grad": g, "LearningRate": lr, "Moment": rand(rng, 3, 4),
                   "InfNorm": pos, "Beta1Pow": np.array([0.9 ** 3], dtype="float32")},
        {"beta1": 0.9, "beta2": 0.99, "epsilon": 1e-8},
        {"ParamOut": "float32", "MomentOut": "float32", "InfNormOut": "float32"})
    for power in (-0.5, -0.3):
        cases["ftrl_" + str(-power)] = run_op(
            "ftrl", {"Param": p, "Grad": g, "SquaredAccumulator": pos,
                     "LinearAccumulator": rand(rng, 3, 4), "LearningRate": lr},
            {"l1": 0.05, "l2": 0.1, "lr_power": power},
            {"ParamOut": "float32", "SquaredAccumOut": "float32", "LinearAccumOut": "float32"})
    cases["lamb"] = run_op(
        "lamb", {"Param": p, "Grad": g, "LearningRate": lr, "Moment1": rand(rng, 3, 4),
                 "Moment2": pos, "Beta1Pow": np.array([0.9 ** 2], dtype="float32"),
                 "Beta2Pow": np.array([0.999 ** 2], dtype="float32")},
        {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6, "weight_decay": 0.01},
        {"ParamOut": "float32", "Moment1Out": "float32", "Moment2Out": "float32"})
    cases["lars_momentum"] = run_op(
        "lars_momentum", {"Param": p, "Grad": g, "Velocity": rand(rng, 3, 4),
                          "LearningRate": lr},
        {"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": 0.0005},
        {"ParamOut": "float32", "VelocityOut": "float32"})
    for n_upd, n_acc, old in ((4, 2, 0), (5, 3, 2), (16383, 5, 0)):
        cases["average_accumulates_" + str(n_upd)] = run_op(
            "average_accumulates",
            {"param": p, "in_sum_1": pos, "in_sum_2": pos2, "in_sum_3": rand(rng, 3, 4),
             "in_num_accumulates": np.array([n_acc], dtype="int64"),
             "in_old_num_accumulates": np.array([old], dtype="int64"),
             "in_num_updates": np.array([n_upd], dtype="int64")},
            {"average_window": 0.5, "min_average_window": 2, "max_average_window": 4},
            {"out_sum_1": "float32", "out_sum_2": "float32", "out_sum_3": "float32",
             "out_num_accumulates": "int64", "out_old_num_accumulates": "int64",
             "out_num_updates": "int64"})
    return cases


def net_data():
    rng = np.random.RandomState(7)
    init = {"fc_0.w_0": rand(rng, 4, 5), "fc_0.b_0": rand(rng, 5),
            "fc_1.w_0": rand(rng, 5, 2), "fc_1.b_0": rand(rng, 2)}
    batches = [(rand(rng, 6, 4), rand(rng, 6, 2)) for _ in range(STEPS)]
    return init, batches


def build_net(init, error_clip=None):
    x = fluid.data("x", [None, 4], "float32")
    y = fluid.data("y", [None, 2], "float32")
    attrs = {}
    for name, value in init.items():
        attrs[name] = fluid.ParamAttr(
            name=name, initializer=fluid.initializer.NumpyArrayInitializer(value))
    h = fluid.layers.fc(x, 5, act="tanh", param_attr=attrs["fc_0.w_0"],
                        bias_attr=attrs["fc_0.b_0"])
    if error_clip is not None:
        h.error_clip = error_clip
    out = fluid.layers.fc(h, 2, param_attr=attrs["fc_1.w_0"], bias_attr=attrs["fc_1.b_0"])
    return fluid.layers.mean(fluid.layers.square_error_cost(out, y))


def train(make_opt, error_clip=None, lr_fn=None, before=None, after=None):
    """Parameters after STEPS steps; `make_opt(lr)` builds the optimizer."""
    init, batches = net_data()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = build_net(init, error_clip)
        lr = lr_fn() if lr_fn is not None else 0.1
        if before is not None:
            before(main)
        opt = make_opt(lr)
        opt.minimize(loss)
        extra = after() if after is not None else None
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    lrs = []
    with fluid.scope_guard(scope):
        exe.run(startup)
        for x, y in batches:
            fetch = [loss] + ([lr] if isinstance(lr, fluid.Variable) else [])
            got = exe.run(main, feed={"x": x, "y": y}, fetch_list=fetch)
            if len(got) > 1:
                lrs.append(np.array(got[1]))
        params = {n: np.array(scope.find_var(n).get_tensor()) for n in sorted(init)}
        result = {"params": params}
        if lrs:
            result["lrs"] = np.concatenate(lrs)
        if extra is not None:
            with extra.apply(exe, need_restore=True):
                result["applied"] = {n: np.array(scope.find_var(n).get_tensor())
                                     for n in sorted(init)}
            result["restored"] = {n: np.array(scope.find_var(n).get_tensor())
                                  for n in sorted(init)}
    return result


def exclude_bias(param):
    return param.name.endswith(".b_0")


def train_cases():
    opt = fluid.optimizer
    reg = fluid.regularizer
    cases = {
        "adagrad": train(lambda lr: opt.Adagrad(lr, initial_accumulator_value=0.1)),
        "decayed_adagrad": train(lambda lr: opt.DecayedAdagrad(lr, decay=0.9)),
        "rmsprop": train(lambda lr: opt.RMSProp(lr)),
        "rmsprop_centered": train(lambda lr: opt.RMSProp(lr, momentum=0.5, centered=True)),
        "adadelta": train(lambda lr: opt.Adadelta(lr, rho=0.9)),
        "adamax": train(lambda lr: opt.Adamax(lr)),
        "ftrl": train(lambda lr: opt.Ftrl(lr, l1=0.01, l2=0.02)),
        "lamb": train(lambda lr: opt.Lamb(lr, exclude_from_weight_decay_fn=exclude_bias)),
        "lars": train(lambda lr: opt.LarsMomentum(lr, momentum=0.9)),
        "lookahead": train(lambda lr: opt.LookaheadOptimizer(opt.SGD(lr), alpha=0.5, k=2)),
        "l1_l2": train(lambda lr: opt.SGD(lr, regularization=reg.L2Decay(0.1))),
        "clip_value": train(lambda lr: opt.SGD(
            lr, grad_clip=fluid.clip.GradientClipByValue(0.05))),
        "clip_norm": train(lambda lr: opt.Momentum(
            lr, 0.9, grad_clip=fluid.clip.GradientClipByNorm(0.1))),
        "clip_global": train(lambda lr: opt.Adam(
            lr, grad_clip=fluid.clip.GradientClipByGlobalNorm(0.1))),
        "set_gradient_clip": train(
            lambda lr: opt.SGD(lr),
            before=lambda main: fluid.clip.set_gradient_clip(
                fluid.clip.GradientClipByGlobalNorm(0.1), program=main)),
        "error_clip": train(lambda lr: opt.SGD(lr),
                            error_clip=fluid.clip.ErrorClipByValue(0.01)),
        "ema": train(lambda lr: opt.SGD(lr), after=_ema),
        "ema_thres": train(lambda lr: opt.SGD(lr), after=_ema_thres),
        "model_average": train(lambda lr: opt.SGD(lr), after=lambda: opt.ModelAverage(
            0.5, min_average_window=1, max_average_window=2)),
    }
    return cases


def _ema():
    ema = fluid.optimizer.ExponentialMovingAverage(0.9)
    ema.update()
    return ema


def _ema_thres():
    # a float step count, as model-zoo trainers pass (_decay_step_counter())
    step = fluid.layers.cast(fluid.layers.autoincreased_step_counter(
        counter_name="@THRES@", begin=1), "float32")
    ema = fluid.optimizer.ExponentialMovingAverage(0.999, thres_steps=step)
    ema.update()
    return ema


def regularized_cases():
    """L1 on fc_0.w_0 through ParamAttr, overriding the optimizer's L2."""
    init, batches = net_data()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        y = fluid.data("y", [None, 2], "float32")
        w0 = fluid.ParamAttr(name="fc_0.w_0",
                             initializer=fluid.initializer.NumpyArrayInitializer(
                                 init["fc_0.w_0"]),
                             regularizer=fluid.regularizer.L1Decay(0.05))
        attrs = {n: fluid.ParamAttr(name=n, initializer=fluid.initializer.NumpyArrayInitializer(
            v)) for n, v in init.items()}
        h = fluid.layers.fc(x, 5, act="tanh", param_attr=w0, bias_attr=attrs["fc_0.b_0"])
        out = fluid.layers.fc(h, 2, param_attr=attrs["fc_1.w_0"], bias_attr=attrs["fc_1.b_0"])
        loss = fluid.layers.mean(fluid.layers.square_error_cost(out, y))
        fluid.optimizer.SGD(0.1, regularization=fluid.regularizer.L2Decay(0.1)).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for xb, yb in batches:
            exe.run(main, feed={"x": xb, "y": yb})
        return {"params": {n: np.array(scope.find_var(n).get_tensor()) for n in sorted(init)}}


SCHEDULES = {
    "exponential": lambda: fluid.layers.exponential_decay(0.1, 3, 0.5),
    "exponential_stair": lambda: fluid.layers.exponential_decay(0.1, 3, 0.5, staircase=True),
    "natural_exp": lambda: fluid.layers.natural_exp_decay(0.1, 3, 0.5),
    "natural_exp_stair": lambda: fluid.layers.natural_exp_decay(0.1, 3, 0.5, True),
    "inverse_time": lambda: fluid.layers.inverse_time_decay(0.1, 3, 0.5),
    "inverse_time_stair": lambda: fluid.layers.inverse_time_decay(0.1, 3, 0.5, True),
    "polynomial": lambda: fluid.layers.polynomial_decay(0.1, 4, 0.01, power=2.0),
    "polynomial_cycle": lambda: fluid.layers.polynomial_decay(0.1, 3, 0.01, 1.5, cycle=True),
    "piecewise": lambda: fluid.layers.piecewise_decay([2, 5], [0.1, 0.05, 0.01]),
    "noam": lambda: fluid.layers.noam_decay(16, 3, learning_rate=2.0),
    "cosine": lambda: fluid.layers.cosine_decay(0.1, 2, 4),
    "warmup": lambda: fluid.layers.linear_lr_warmup(0.1, 3, 0.0, 0.1),
    "warmup_var": lambda: fluid.layers.linear_lr_warmup(
        fluid.layers.exponential_decay(0.1, 2, 0.5), 3, 0.01, 0.1),
}


def schedule_cases():
    cases = {}
    for name, make in SCHEDULES.items():
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            lr = make()
        exe = fluid.Executor(fluid.CPUPlace())
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            exe.run(startup)
            cases[name] = np.concatenate(
                [np.array(exe.run(main, fetch_list=[lr])[0]) for _ in range(8)])
    # a schedule driving SGD: learning rates per step and the parameters after 3 steps
    cases["sgd_exponential"] = train(lambda lr: fluid.optimizer.SGD(lr),
                                     lr_fn=lambda: fluid.layers.exponential_decay(0.5, 1, 0.5))
    return cases


def main():
    cases = {}
    for name, case in op_cases().items():
        cases["op/" + name] = case
    for name, case in train_cases().items():
        cases["train/" + name] = case
    cases["train/param_attr_l1"] = regularized_cases()
    for name, case in schedule_cases().items():
        cases["lr/" + name] = case
    save("optim", cases, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
