"""fluid.layers learning-rate schedules, computed in the main program from fluid's global step
counter, and `autoincreased_step_counter`.

The counter `@LR_DECAY_COUNTER@` is a persistable int64 [1] variable: the startup program sets
it to begin - 1 and an `increment` op at the very start of the main program adds 1 on every
run, so the first run sees `begin` (0 for the decays, 1 for noam_decay, as fluid). Being
persistable it is saved with the parameters (fluid.io.save_persistables) and restored with
them; in data parallel every rank runs the same increment, so all ranks agree on it.

Each schedule returns a float32 [1] variable, recomputed on every run by one `lr_<schedule>` op
(spmd/ops/optim_schedule.py), to pass as an optimizer's `learning_rate`:

>>> # lr = fluid.layers.exponential_decay(learning_rate=0.1, decay_steps=1000, decay_rate=0.9)
>>> # fluid.optimizer.SGD(learning_rate=lr).minimize(avg_loss)
"""
from __future__ import annotations

import numbers

from ..core.dtypes import is_floating
from ..core.operator import OpRole
from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .helper import LayerHelper
from .initializer import ConstantInitializer

__all__ = ["autoincreased_step_counter", "cosine_decay", "exponential_decay",
           "inverse_time_decay", "linear_lr_warmup", "natural_exp_decay", "noam_decay",
           "piecewise_decay", "polynomial_decay"]

LR_DECAY_COUNTER = "@LR_DECAY_COUNTER@"


def autoincreased_step_counter(counter_name=None, begin=1, step=1):
    """The persistable int64 [1] counter `counter_name` (default '@STEP_COUNTER@'): the startup
    program sets it to begin - 1 and every run of the main program first adds `step` (so with
    step 1 the first run sees `begin`). Asking again for the same name returns the same
    counter (and adds no second increment).

    >>> # step = fluid.layers.autoincreased_step_counter(counter_name="@MY_STEP@", begin=0)
    """
    name = "@STEP_COUNTER@" if counter_name is None else counter_name
    if not isinstance(name, str):
        raise InvalidArgumentError(
            f"autoincreased_step_counter: counter_name must be a str, got {counter_name!r}")
    for arg, value in (("begin", begin), ("step", step)):
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise InvalidArgumentError(
                f"autoincreased_step_counter: {arg} must be a number, got {value!r}")
    helper = LayerHelper("global_step_counter")
    block = helper.main_program.global_block()
    if block.has_var(name):
        return block.var(name)
    counter = helper.create_global_variable(shape=[1], dtype="int64", persistable=True,
                                            name=name, stop_gradient=True)
    helper.set_variable_initializer(counter, ConstantInitializer(float(begin - 1),
                                                                 force_cpu=True))
    # first op of the program, so every op of the step reads the advanced value
    block._prepend_op("increment", inputs={"X": [counter]}, outputs={"Out": [counter]},
                      attrs={"step": float(step)})
    return counter


def _decay_step_counter(begin=0):
    """fluid's helper, which model-zoo trainers call directly (an EMA's thres_steps): the
    global step counter as a float32 [1] variable.

    >>> # steps = fluid.layers.learning_rate_scheduler._decay_step_counter()
    """
    counter = autoincreased_step_counter(LR_DECAY_COUNTER, begin=begin, step=1)
    helper = LayerHelper("decay_step_counter")
    out = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    helper.append_op("cast", inputs={"X": [counter]}, outputs={"Out": [out]},
                     attrs={"in_dtype": counter.dtype, "out_dtype": "float32"})
    return out


def _number(value, arg: str, where: str, positive=False) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise InvalidArgumentError(f"{where}: {arg} must be a number, got {value!r}")
    if positive and value <= 0:
        raise InvalidArgumentError(f"{where}: {arg} must be > 0, got {value}")
    return float(value)


def _schedule(kind: str, attrs: dict, begin=0, inputs=None, dtype="float32"):
    """Append `lr_<kind>` reading the global step counter; its output holds the rate. The
    output is persistable so that optimizer.current_step_lr() can read it after a run."""
    helper = LayerHelper(kind)
    # fluid's _lr_schedule_guard: the schedule and its counter are no part of a test clone
    with helper.main_program.role_guard(OpRole.LR_SCHED):
        counter = autoincreased_step_counter(LR_DECAY_COUNTER, begin=begin, step=1)
        out = helper.create_global_variable(shape=[1], dtype=dtype, persistable=True,
                                            stop_gradient=True)
        helper.set_variable_initializer(out, ConstantInitializer(0.0))
        helper.append_op(f"lr_{kind}", inputs={"Step": [counter], **(inputs or {})},
                         outputs={"Out": [out]}, attrs=attrs)
    return out


def _decay(kind, learning_rate, decay_steps, decay_rate, staircase):
    """The exponential, natural-exp and inverse-time decays as fluid 1.8.5 builds them, one op
    per step of its Python arithmetic (cast, scale, floor, elementwise_pow, exp, ...): the
    same float32 values, and the same ops in a transpiled pserver's learning-rate block. The
    last op writes a persistable variable (optimizer.current_step_lr reads it after a run)."""
    from . import activation, math_ops

    lr = _number(learning_rate, "learning_rate", kind)
    steps = _number(decay_steps, "decay_steps", kind, positive=True)
    rate = _number(decay_rate, "decay_rate", kind)
    helper = LayerHelper(kind)
    with helper.main_program.role_guard(OpRole.LR_SCHED):
        div = _decay_step_counter() / steps
        if staircase:
            div = activation.floor(div)
        # written by the main program before anything reads it: no startup op (fluid has none)
        out = helper.create_global_variable(shape=[1], dtype="float32", persistable=True,
                                            stop_gradient=True)
        if kind == "exponential_decay":  # lr * rate ** div
            helper.append_op("scale", {"X": [rate ** div]}, {"Out": [out]},
                             {"scale": lr, "bias": 0.0, "bias_after_scale": True})
        elif kind == "natural_exp_decay":  # lr * exp(-rate * div)
            helper.append_op("scale", {"X": [math_ops.exp(-1 * rate * div)]}, {"Out": [out]},
                             {"scale": lr, "bias": 0.0, "bias_after_scale": True})
        else:  # inverse_time_decay: lr / (1 + rate * div)
            denom = 1 + rate * div
            num = _fill_like(helper, denom, lr)
            helper.append_op("elementwise_div", {"X": [num], "Y": [denom]}, {"Out": [out]},
                             {"axis": -1})
    return out


def _fill_like(helper, var, value: float):
    """fluid's scalar operand of `value / var`: a fill_constant of var's shape and dtype."""
    const = helper.create_variable_for_type_inference(var.dtype, stop_gradient=True)
    helper.append_op("fill_constant", {}, {"Out": [const]},
                     {"shape": list(var.shape), "dtype": var.dtype, "value": float(value)})
    return const


def exponential_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """learning_rate * decay_rate ** (step / decay_steps); with staircase the exponent is
    floored, so the rate drops every decay_steps steps.

    >>> # lr = fluid.layers.exponential_decay(0.1, decay_steps=10000, decay_rate=0.5)
    """
    return _decay("exponential_decay", learning_rate, decay_steps, decay_rate, staircase)


def natural_exp_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """learning_rate * exp(-decay_rate * step / decay_steps) (quotient floored if staircase).

    >>> # lr = fluid.layers.natural_exp_decay(0.1, decay_steps=10000, decay_rate=0.5)
    """
    return _decay("natural_exp_decay", learning_rate, decay_steps, decay_rate, staircase)


def inverse_time_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """learning_rate / (1 + decay_rate * step / decay_steps) (quotient floored if staircase).

    >>> # lr = fluid.layers.inverse_time_decay(0.1, decay_steps=10000, decay_rate=0.5)
    """
    return _decay("inverse_time_decay", learning_rate, decay_steps, decay_rate, staircase)


def polynomial_decay(learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0,
                     cycle=False):
    """(learning_rate - end_learning_rate) * (1 - step / decay_steps) ** power +
    end_learning_rate, the step capped at decay_steps; with cycle, decay_steps grows to the
    next multiple of itself instead, so the rate restarts.

    >>> # lr = fluid.layers.polynomial_decay(0.1, decay_steps=5000, end_learning_rate=0.001)
    """
    where = "polynomial_decay"
    return _schedule(where, {
        "learning_rate": _number(learning_rate, "learning_rate", where),
        "decay_steps": _number(decay_steps, "decay_steps", where, positive=True),
        "end_learning_rate": _number(end_learning_rate, "end_learning_rate", where),
        "power": _number(power, "power", where), "cycle": bool(cycle)})


def piecewise_decay(boundaries, values):
    """values[i] while step < boundaries[i] (the first such i), values[-1] after the last
    boundary.

    >>> # lr = fluid.layers.piecewise_decay(boundaries=[10000, 20000], values=[1.0, 0.5, 0.1])
    """
    where = "piecewise_decay"
    if not isinstance(boundaries, (list, tuple)) or not isinstance(values, (list, tuple)):
        raise InvalidArgumentError(f"{where}: boundaries and values must be lists, got "
                                   f"{type(boundaries).__name__} and {type(values).__name__}")
    if len(values) - len(boundaries) != 1:
        raise InvalidArgumentError(
            f"{where}: len(values) - len(boundaries) should be 1, got {len(values)} values and "
            f"{len(boundaries)} boundaries")
    return _schedule(where, {
        "boundaries": [_number(b, "boundaries[i]", where) for b in boundaries],
        "values": [_number(v, "values[i]", where) for v in values]})


def noam_decay(d_model, warmup_steps, learning_rate=1.0):
    """The Transformer's schedule: learning_rate * d_model**-0.5 *
    min(step**-0.5, warmup_steps**-1.5 * step), counting steps from 1.

    >>> # lr = fluid.layers.noam_decay(d_model=512, warmup_steps=4000)
    """
    where = "noam_decay"
    return _schedule(where, {
        "d_model": _number(d_model, "d_model", where, positive=True),
        "warmup_steps": _number(warmup_steps, "warmup_steps", where, positive=True),
        "learning_rate": _number(learning_rate, "learning_rate", where)}, begin=1)


def cosine_decay(learning_rate, step_each_epoch, epochs):
    """learning_rate * 0.5 * (cos(epoch * pi / epochs) + 1), epoch = floor(step /
    step_each_epoch).

    >>> # lr = fluid.layers.cosine_decay(0.1, step_each_epoch=100, epochs=120)
    """
    where = "cosine_decay"
    return _schedule(where, {
        "learning_rate": _number(learning_rate, "learning_rate", where),
        "step_each_epoch": _number(step_each_epoch, "step_each_epoch", where, positive=True),
        "epochs": _number(epochs, "epochs", where, positive=True)})


def linear_lr_warmup(learning_rate, warmup_steps, start_lr, end_lr):
    """start_lr + (end_lr - start_lr) * step / warmup_steps for the first warmup_steps steps,
    then `learning_rate`: a float, or a Variable such as another schedule's output.

    >>> # base = fluid.layers.piecewise_decay([100, 200], [0.1, 0.01, 0.001])
    >>> # lr = fluid.layers.linear_lr_warmup(base, warmup_steps=50, start_lr=0.0, end_lr=0.1)
    """
    where = "linear_lr_warmup"
    attrs = {"warmup_steps": _number(warmup_steps, "warmup_steps", where, positive=True),
             "start_lr": _number(start_lr, "start_lr", where),
             "end_lr": _number(end_lr, "end_lr", where)}
    if isinstance(learning_rate, Variable):
        if not is_floating(learning_rate.dtype):
            raise InvalidArgumentError(
                f"{where}: learning_rate Variable '{learning_rate.name}' must be float, got "
                f"{learning_rate.dtype}")
        return _schedule("linear_warmup", attrs,
                         inputs={"LearningRate": [learning_rate]}, dtype=learning_rate.dtype)
    attrs["learning_rate"] = _number(learning_rate, "learning_rate", where)
    return _schedule("linear_warmup", attrs)
