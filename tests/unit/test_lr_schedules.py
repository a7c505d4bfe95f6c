"""Learning-rate schedules: fluid.layers' schedules (values against PaddlePaddle 1.8.5, stored in
tests/oracle/data/optim.json by tests/oracle/make_optim.py), fluid's global step counter
(persistable, saved and restored, the same in data parallel), and paddle 2.x's
paddle.optimizer.lr schedulers (value sequences against PaddlePaddle 2.x's formulas, quoted in
each case) driving a static program."""
from __future__ import annotations

import math

import numpy as np
import pytest
from oracle_io import load

import spmd as paddle
import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

ORACLE = load("optim")
L = fluid.layers
FLUID_SCHEDULES = {
    "exponential": lambda: L.exponential_decay(0.1, 3, 0.5),
    "exponential_stair": lambda: L.exponential_decay(0.1, 3, 0.5, staircase=True),
    "natural_exp": lambda: L.natural_exp_decay(0.1, 3, 0.5),
    "natural_exp_stair": lambda: L.natural_exp_decay(0.1, 3, 0.5, True),
    "inverse_time": lambda: L.inverse_time_decay(0.1, 3, 0.5),
    "inverse_time_stair": lambda: L.inverse_time_decay(0.1, 3, 0.5, True),
    "polynomial": lambda: L.polynomial_decay(0.1, 4, 0.01, power=2.0),
    "polynomial_cycle": lambda: L.polynomial_decay(0.1, 3, 0.01, 1.5, cycle=True),
    "piecewise": lambda: L.piecewise_decay([2, 5], [0.1, 0.05, 0.01]),
    "noam": lambda: L.noam_decay(16, 3, learning_rate=2.0),
    "cosine": lambda: L.cosine_decay(0.1, 2, 4),
    "warmup": lambda: L.linear_lr_warmup(0.1, 3, 0.0, 0.1),
    "warmup_var": lambda: L.linear_lr_warmup(L.exponential_decay(0.1, 2, 0.5), 3, 0.01, 0.1),
}


def _program(make):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        lr = make()
    return main, startup, lr


@pytest.mark.parametrize("name", sorted(FLUID_SCHEDULES))
def test_fluid_schedule_values_equal_fluid(name):
    main, startup, lr = _program(FLUID_SCHEDULES[name])
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    got = np.concatenate([exe.run(main, fetch_list=[lr], scope=scope)[0] for _ in range(8)])
    assert got.dtype == np.float32 and lr.shape == (1,)
    np.testing.assert_allclose(got, ORACLE["lr/" + name], rtol=1e-6)


def test_step_counter_is_persistable_saved_and_restored(tmp_path):
    main, startup, lr = _program(FLUID_SCHEDULES["exponential"])
    counter = main.global_block().var("@LR_DECAY_COUNTER@")
    assert counter.persistable and counter.dtype == "int64"
    assert main.global_block().ops[0].type == "increment"  # advanced before anything reads it
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(3):
            exe.run(main, fetch_list=[lr])
        fluid.io.save_persistables(exe, str(tmp_path), main)
    fresh = fluid.Scope()
    with fluid.scope_guard(fresh):
        exe.run(startup)
        fluid.io.load_persistables(exe, str(tmp_path), main)
        (value,) = exe.run(main, fetch_list=[lr])  # the 4th step: counter 3
    np.testing.assert_allclose(value, ORACLE["lr/exponential"][3:4], rtol=1e-6)


def test_autoincreased_step_counter_is_shared_by_name():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = L.autoincreased_step_counter(counter_name="@C@", begin=5, step=2)
        b = L.autoincreased_step_counter(counter_name="@C@")
    assert a is b
    assert sum(op.type == "increment" for op in main.global_block().ops) == 1
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    values = [int(exe.run(main, fetch_list=[a], scope=scope)[0][0]) for _ in range(3)]
    assert values == [6, 8, 10]  # fluid: starts at begin - 1, each run first adds step


def test_schedule_in_data_parallel_equals_one_process():
    """Each place advances its own counter identically: the same rates as one process."""
    main, startup, lr = _program(FLUID_SCHEDULES["piecewise"])
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(places=[fluid.CPUPlace()] * 2)
    got = [exe.run(compiled, fetch_list=[lr], scope=scope)[0] for _ in range(8)]
    np.testing.assert_allclose(np.stack(got), np.repeat(ORACLE["lr/piecewise"][:, None], 2, 1),
                               rtol=1e-6)


def test_current_step_lr_reads_the_schedule_from_the_global_scope():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 2], "float32")
        loss = L.mean(L.fc(x, 1))
        opt = fluid.optimizer.SGD(learning_rate=L.piecewise_decay([2], [0.1, 0.01]))
        opt.minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        seen = []
        for _ in range(3):
            exe.run(main, feed={"x": np.ones((2, 2), "float32")})
            seen.append(opt.current_step_lr())
    np.testing.assert_allclose(seen, [0.1, 0.1, 0.01], rtol=1e-6)
    assert fluid.optimizer.SGD(0.25).current_step_lr() == 0.25


@pytest.mark.parametrize("make, message", [
    (lambda: L.piecewise_decay([1, 2], [0.1]), "len\\(values\\) - len\\(boundaries\\)"),
    (lambda: L.exponential_decay(0.1, 0, 0.5), "decay_steps must be > 0"),
    (lambda: L.linear_lr_warmup(0.1, 3, "a", 0.1), "start_lr must be a number"),
])
def test_bad_schedule_arguments(make, message):
    with pytest.raises(InvalidArgumentError, match=message):
        _program(make)


# -- paddle.optimizer.lr: PaddlePaddle 2.x's formulas (python/paddle/optimizer/lr.py) -----------
LR = paddle.optimizer.lr
PADDLE2 = {
    # NoamDecay: base * d_model**-0.5 * min(a, b), a = 1 at epoch 0 else epoch**-0.5,
    # b = warmup_steps**-1.5 * epoch
    "noam": (lambda: LR.NoamDecay(16, 3, learning_rate=2.0),
             lambda e: 2.0 * 16 ** -0.5 * min(1.0 if e == 0 else e ** -0.5, 3 ** -1.5 * e)),
    # PiecewiseDecay: values[i] for the first boundary with epoch < boundaries[i]
    "piecewise": (lambda: LR.PiecewiseDecay([2, 5], [0.1, 0.05, 0.01]),
                  lambda e: 0.1 if e < 2 else 0.05 if e < 5 else 0.01),
    # NaturalExpDecay: base * exp(-gamma * epoch)
    "natural_exp": (lambda: LR.NaturalExpDecay(0.5, gamma=0.3), lambda e: 0.5 * math.exp(-0.3 * e)),
    # InverseTimeDecay: base / (1 + gamma * epoch)
    "inverse_time": (lambda: LR.InverseTimeDecay(0.5, gamma=0.3), lambda e: 0.5 / (1 + 0.3 * e)),
    # PolynomialDecay: (base - end) * (1 - min(epoch, steps) / steps) ** power + end
    "polynomial": (lambda: LR.PolynomialDecay(0.5, 4, end_lr=0.01, power=2.0),
                   lambda e: 0.49 * (1 - min(e, 4) / 4) ** 2 + 0.01),
    # cycle: steps *= ceil(epoch / steps) (1 at epoch 0)
    "polynomial_cycle": (lambda: LR.PolynomialDecay(0.5, 3, end_lr=0.01, cycle=True),
                         lambda e: 0.49 * (1 - e / (3 * max(1, math.ceil(e / 3)))) + 0.01),
    # LinearWarmup: start + (end - start) * epoch / warmup while epoch < warmup, then base
    "warmup": (lambda: LR.LinearWarmup(0.5, 3, 0.0, 0.5),
               lambda e: 0.5 * e / 3 if e < 3 else 0.5),
    # LinearWarmup over a scheduler: after warmup, the inner one stepped to epoch - warmup
    "warmup_sched": (lambda: LR.LinearWarmup(LR.ExponentialDecay(0.5, 0.9), 2, 0.1, 0.5),
                     lambda e: 0.1 + 0.4 * e / 2 if e < 2 else 0.5 * 0.9 ** (e - 2)),
    # ExponentialDecay: base * gamma ** epoch
    "exponential": (lambda: LR.ExponentialDecay(0.5, 0.8), lambda e: 0.5 * 0.8 ** e),
    # MultiStepDecay: base * gamma ** (number of milestones <= epoch)
    "multistep": (lambda: LR.MultiStepDecay(0.5, [2, 5], gamma=0.5),
                  lambda e: 0.5 * 0.5 ** sum(e >= m for m in (2, 5))),
    # StepDecay: base * gamma ** (epoch // step_size)
    "step": (lambda: LR.StepDecay(0.5, 3, gamma=0.5), lambda e: 0.5 * 0.5 ** (e // 3)),
    # LambdaDecay: base * lr_lambda(epoch)
    "lambda": (lambda: LR.LambdaDecay(0.5, lambda e: 0.95 ** e), lambda e: 0.5 * 0.95 ** e),
    # CosineAnnealingDecay, closed form: eta_min + (base - eta_min) * (1 + cos(pi e / T)) / 2
    # (the recursive form 2.x uses per step equals it while epoch <= T_max)
    "cosine": (lambda: LR.CosineAnnealingDecay(0.5, T_max=7, eta_min=0.1),
               lambda e: 0.1 + 0.4 * (1 + math.cos(math.pi * e / 7)) / 2),
}


@pytest.mark.parametrize("name", sorted(PADDLE2))
def test_paddle2_scheduler_sequence(name):
    make, formula = PADDLE2[name]
    sched = make()
    got = []
    for _ in range(8):
        got.append(sched())
        sched.step()
    np.testing.assert_allclose(got, [formula(e) for e in range(8)], rtol=1e-12, atol=1e-15)


def test_scheduler_step_to_epoch_and_state_dict():
    sched = LR.CosineAnnealingDecay(0.5, T_max=4)
    sched.step(3)  # closed form
    assert sched() == pytest.approx(0.5 * (1 + math.cos(math.pi * 3 / 4)) / 2)
    other = LR.CosineAnnealingDecay(0.5, T_max=4)
    other.set_state_dict(sched.state_dict())
    assert (other.last_epoch, other()) == (3, sched())


def test_reduce_on_plateau():
    """2.x: after more than `patience` epochs without a relative improvement of `threshold`,
    lr = max(lr * factor, min_lr), then `cooldown` epochs of rest."""
    sched = LR.ReduceOnPlateau(1.0, patience=1, factor=0.5, cooldown=1, min_lr=0.2)
    seen = []
    for metric in [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]:
        sched.step(np.array([metric]))
        seen.append(sched())
    assert seen == [1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2]


@pytest.mark.parametrize("places", [1, 2])
def test_scheduler_drives_a_static_program(places):
    """loss = mean(x @ w) with x = 1: each step w -= lr, so w records the rates used."""
    sched = LR.StepDecay(0.5, step_size=2, gamma=0.1)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 1], "float32")
        w = fluid.ParamAttr(name="w", initializer=fluid.initializer.Constant(0.0))
        loss = L.mean(L.fc(x, 1, param_attr=w, bias_attr=False))
        opt = paddle.optimizer.SGD(learning_rate=sched)
        opt.minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    prog = main if places == 1 else fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=[fluid.CPUPlace()] * places)
    ws, lrs = [], []
    for _ in range(5):
        exe.run(prog, feed={"x": np.ones((2, 1), "float32")}, scope=scope)
        ws.append(float(np.array(scope.find_var("w").get_tensor()).reshape(-1)[0]))
        lrs.append(opt.get_lr())
        sched.step()
    np.testing.assert_allclose(lrs, [0.5, 0.5, 0.05, 0.05, 0.005], rtol=1e-6)
    np.testing.assert_allclose(ws, -np.cumsum(lrs), rtol=1e-6)


def test_decay_step_counter_as_float_for_ema_thres_steps():
    from spmd.layers.learning_rate_scheduler import _decay_step_counter

    main, startup, steps = _program(_decay_step_counter)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    got = [exe.run(main, fetch_list=[steps], scope=scope)[0] for _ in range(3)]
    np.testing.assert_array_equal(np.concatenate(got), np.array([0, 1, 2], "float32"))
