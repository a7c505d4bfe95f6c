"""Kernels: the learning-rate schedules, Lookahead's and EMA's helpers.

A schedule reads the int64 step counter (shape [1]) and writes a float32 [1] learning rate; the
arithmetic is done in float64 and rounded once, which stays within float32 rounding of fluid's
chain of float32 ops, except for the quotient step / decay_steps that a staircase or cycle
floors or ceils: that one is taken in float32 as fluid does (`_quotient`).
"""
from __future__ import annotations

import math

from .registry import kernel


def _step(xp, ins):
    return ins["Step"].reshape(()).astype(xp.float64)


def _out(xp, value, dtype="float32"):
    return xp.asarray(value, dtype=xp.float64).reshape(1).astype(dtype)


def _quotient(xp, step, divisor):
    """step / divisor as fluid computes it (`global_step / n` is a scale op by float32(1/n),
    in float32): a floor or ceil of it then lands on the same side of a boundary as fluid's,
    which exact division does not for n such as 7 or 41."""
    scaled = xp.asarray(step, dtype=xp.float32) * xp.float32(1.0 / divisor)
    return scaled.astype(xp.float64)


def _div(xp, ins, attrs):
    div = _quotient(xp, _step(xp, ins), attrs["decay_steps"])
    return xp.floor(div) if attrs["staircase"] else div


@kernel("lr_exponential_decay")
def exponential_decay(xp, ins, attrs, want):
    """lr * decay_rate ** (step / decay_steps), the exponent floored when staircase."""
    return {"Out": _out(xp, attrs["learning_rate"] * attrs["decay_rate"] ** _div(xp, ins, attrs))}


@kernel("lr_natural_exp_decay")
def natural_exp_decay(xp, ins, attrs, want):
    """lr * exp(-decay_rate * step / decay_steps), the quotient floored when staircase."""
    value = attrs["learning_rate"] * xp.exp(-attrs["decay_rate"] * _div(xp, ins, attrs))
    return {"Out": _out(xp, value)}


@kernel("lr_inverse_time_decay")
def inverse_time_decay(xp, ins, attrs, want):
    """lr / (1 + decay_rate * step / decay_steps), the quotient floored when staircase."""
    value = attrs["learning_rate"] / (1 + attrs["decay_rate"] * _div(xp, ins, attrs))
    return {"Out": _out(xp, value)}


@kernel("lr_polynomial_decay")
def polynomial_decay(xp, ins, attrs, want):
    """(lr - end) * (1 - step / steps) ** power + end, where steps = decay_steps, step capped
    at decay_steps; with cycle, steps = decay_steps * ceil(step / decay_steps) (1 at step 0)."""
    step, steps = _step(xp, ins), attrs["decay_steps"]
    if attrs["cycle"]:
        steps = steps * xp.maximum(xp.ceil(_quotient(xp, step, steps)), 1.0)
    else:
        step = xp.minimum(step, steps)
    lr, end = attrs["learning_rate"], attrs["end_learning_rate"]
    return {"Out": _out(xp, (lr - end) * (1 - step / steps) ** attrs["power"] + end)}


@kernel("lr_piecewise_decay")
def piecewise_decay(xp, ins, attrs, want):
    """values[i] for the first boundary i with step < boundaries[i], else values[-1]."""
    idx = xp.searchsorted(xp.asarray(attrs["boundaries"], dtype=xp.float64),
                          _step(xp, ins).reshape(1), side="right")
    return {"Out": xp.asarray(attrs["values"], dtype=xp.float64)[idx].astype("float32")}


@kernel("lr_noam_decay")
def noam_decay(xp, ins, attrs, want):
    """lr * d_model**-0.5 * min(step**-0.5, warmup_steps**-1.5 * step)."""
    step = _step(xp, ins)
    value = attrs["learning_rate"] * attrs["d_model"] ** -0.5 * xp.minimum(
        step ** -0.5, attrs["warmup_steps"] ** -1.5 * step)
    return {"Out": _out(xp, value)}


@kernel("lr_cosine_decay")
def cosine_decay(xp, ins, attrs, want):
    """lr * 0.5 * (cos(floor(step / step_each_epoch) * pi / epochs) + 1)."""
    epoch = xp.floor(_quotient(xp, _step(xp, ins), attrs["step_each_epoch"]))
    value = attrs["learning_rate"] * 0.5 * (xp.cos(epoch * math.pi / attrs["epochs"]) + 1)
    return {"Out": _out(xp, value)}


@kernel("lr_linear_warmup")
def linear_warmup(xp, ins, attrs, want):
    """start_lr + (end_lr - start_lr) * step / warmup_steps while step < warmup_steps, then
    the LearningRate input (or the learning_rate attribute)."""
    step = _step(xp, ins)
    start, end = attrs["start_lr"], attrs["end_lr"]
    lr_in = ins.get("LearningRate")
    dtype = lr_in.dtype if lr_in is not None else "float32"
    after = (lr_in.reshape(()).astype(xp.float64) if lr_in is not None
             else attrs["learning_rate"])
    warm = start + (end - start) * (step / attrs["warmup_steps"])
    return {"Out": _out(xp, xp.where(step < attrs["warmup_steps"], warm, after), dtype)}


@kernel("lookahead_step")
def lookahead_step(xp, ins, attrs, want):
    """Every k-th step (Step % k == 0): slow = alpha*fast + (1-alpha)*slow, fast = slow."""
    fast, slow = ins["Param"], ins["SlowParam"]
    if int(ins["Step"].reshape(-1)[0]) % attrs["k"] != 0:  # host control flow, one scalar
        return {"ParamOut": fast.copy(), "SlowParamOut": slow.copy()}
    alpha = fast.dtype.type(attrs["alpha"])
    mixed = alpha * fast + (1 - alpha) * slow
    return {"ParamOut": mixed, "SlowParamOut": mixed.copy()}


@kernel("ema_bias_correction")
def ema_bias_correction(xp, ins, attrs, want):
    """Ema / (1 - Decay**Step) once Step > 0, else Ema unchanged."""
    ema = ins["Ema"]
    step = ins["Step"].reshape(()).astype(ema.dtype)
    decay = ins["Decay"].reshape(()).astype(ema.dtype)
    if not float(step) > 0:
        return {"Out": ema.copy()}
    return {"Out": ema / (1 - decay ** step)}
