"""Kernels: the loops over a sub-block, while and recurrent (StaticRNN), their gradients, and
rnn_memory_helper.

Only when the backward pass asked for them (it binds the op's StepScopes / step_scopes
output) does a loop keep, per iteration, the values its state had when the iteration began
and the random generator's state: the gradient block recomputes the iteration from them (with
the same random draws), then differentiates it. Values are never changed in place (writing a
tensor array makes a new list), so a loop's saved states stay what they were.
"""
from __future__ import annotations

from ..core.lod import lod_key
from ..errors import InvalidArgumentError
from .control_flow import (
    RngReplay,
    add_values,
    block_env,
    lod_entries,
    materialize,
    rng_state,
    scalar_int,
    zeros_like_value,
)
from .registry import kernel

# -- while ------------------------------------------------------------------------------------

@kernel("while", context=True)
def while_(xp, ins, attrs, want, ctx):
    x_names = attrs["x_names"]
    env = block_env(zip(x_names, ins["X"]), lod_entries(x_names, ins.get("X@LOD")))
    cond = attrs["cond_name"]
    env[cond] = ins["Condition"]
    out_names = attrs["out_names"]
    steps = [] if "StepScopes" in want else None
    while scalar_int(env[cond], f"the while loop's condition '{cond}'"):
        if steps is not None:  # the backward pass recomputes this iteration from these
            state = {k: env[k] for n in out_names for k in (n, lod_key(n)) if k in env}
            steps.append((state, rng_state(ctx)))
        ctx.run_block(attrs["sub_block"], env, xp)
    res = {"Out": [env.get(n) for n in out_names],
           "Out@LOD": [env.get(lod_key(n)) for n in out_names]}
    if steps is not None:
        res["StepScopes"] = steps
    return res


@kernel("while_grad", context=True)
def while_grad(xp, ins, attrs, want, ctx):
    x_names, out_names = attrs["x_names"], attrs["out_names"]
    xs = dict(zip(x_names, ins["X"]))
    x_lods = lod_entries(x_names, ins.get("X@LOD"))
    finals = dict(zip(out_names, ins.get("Out", [])))
    incoming = dict(zip(attrs["grad_out_names"], ins.get("Out@GRAD", [])))
    seeds = {n: s for n, s in zip(out_names, attrs["seed_names"]) if s}
    results = {n: r for n, r in zip(x_names, attrs["result_names"]) if r}
    steps = ins["StepScopes"]
    written = set(out_names)
    grad_end = {n: incoming.get(n) for n in seeds}  # at the end of the iteration at hand
    summed: dict = {}  # inputs the body only reads: their gradients add up over iterations
    for t in reversed(range(len(steps))):
        values, rng = steps[t]
        ends = steps[t + 1][0] if t + 1 < len(steps) else finals
        env = block_env(xs, x_lods, values)
        for n, seed in seeds.items():
            g = grad_end[n]
            env[seed] = zeros_like_value(xp, ends.get(n)) if g is None else g
        with RngReplay(ctx, rng):
            ctx.run_block(attrs["sub_block"], env, xp)
        for n in seeds:
            grad_end[n] = env.get(results[n]) if n in results else None
        for n, r in results.items():
            if n not in written:
                summed[n] = add_values(summed.get(n), env.get(r))
    grads = [grad_end.get(n) if n in written else summed.get(n) for n in x_names]
    return {"X@GRAD": [materialize(xp, g, xs[n]) for g, n in zip(grads, x_names)]}



# -- recurrent (StaticRNN) ------------------------------------------------------------------------

def _time_order(length: int, reverse: bool) -> list:
    return list(range(length - 1, -1, -1) if reverse else range(length))


def _sequence_length(xs) -> int:
    lengths = {x.shape[0] for x in xs}
    if len(lengths) != 1:
        raise InvalidArgumentError(
            f"StaticRNN: every step input must have the same length (dim 0), got shapes "
            f"{[list(x.shape) for x in xs]}")
    return lengths.pop()


@kernel("recurrent", context=True)
def recurrent(xp, ins, attrs, want, ctx):
    xs = ins["inputs"]
    length = _sequence_length(xs)
    base = dict(zip(attrs["param_names"], ins.get("parameters", [])))
    states = list(ins.get("initial_states", []))
    keep = "step_scopes" in want
    saved = []
    outs = [[None] * length for _ in attrs["step_output_names"]]
    for t in _time_order(length, attrs["reverse"]):
        env = block_env(base, zip(attrs["step_input_names"], [x[t] for x in xs]),
                   zip(attrs["ex_states"], states))
        if keep:
            saved.append((states, rng_state(ctx)))
        ctx.run_block(attrs["sub_block"], env, xp)
        states = [env[n] for n in attrs["states"]]
        for k, n in enumerate(attrs["step_output_names"]):
            outs[k][t] = env[n]
    if length == 0:
        raise InvalidArgumentError("StaticRNN: the step inputs have length 0")
    res = {"outputs": [xp.stack(o) for o in outs]}
    if keep:
        res["step_scopes"] = {"steps": saved, "final": states}
    return res


@kernel("recurrent_grad", context=True)
def recurrent_grad(xp, ins, attrs, want, ctx):
    xs = ins["inputs"]
    length = _sequence_length(xs)
    params = dict(zip(attrs["param_names"], ins.get("parameters", [])))
    inits = ins.get("initial_states", [])
    incoming = dict(zip(attrs["grad_output_names"], ins.get("outputs@GRAD", [])))
    seeds = dict(zip(attrs["step_output_names"] + attrs["states"], attrs["seed_names"]))
    results = dict(zip(attrs["step_input_names"] + attrs["ex_states"] + attrs["param_names"],
                       attrs["result_names"]))
    saved = ins["step_scopes"]
    order = _time_order(length, attrs["reverse"])
    carry = [None] * len(attrs["states"])  # gradients of the states a step ends with
    dxs = [[None] * length for _ in xs]
    dparams: dict = {}
    for pos in range(length - 1, -1, -1):
        t = order[pos]
        starts, rng = saved["steps"][pos]
        ends = saved["steps"][pos + 1][0] if pos + 1 < length else saved["final"]
        env = block_env(params, zip(attrs["step_input_names"], [x[t] for x in xs]),
                   zip(attrs["ex_states"], starts))
        for n in attrs["step_output_names"]:
            if seeds.get(n):
                env[seeds[n]] = incoming[n][t]
        for k, n in enumerate(attrs["states"]):
            if seeds.get(n):
                env[seeds[n]] = zeros_like_value(xp, ends[k]) if carry[k] is None else carry[k]
        with RngReplay(ctx, rng):
            ctx.run_block(attrs["sub_block"], env, xp)
        for k, n in enumerate(attrs["step_input_names"]):
            dxs[k][t] = env.get(results[n]) if results.get(n) else None
        carry = [env.get(results[n]) if results.get(n) else None for n in attrs["ex_states"]]
        for n in attrs["param_names"]:
            if results.get(n):
                dparams[n] = add_values(dparams.get(n), env.get(results[n]))
    res = {"inputs@GRAD": [xp.stack([materialize(xp, g, x[0]) for g in d])
                           for d, x in zip(dxs, xs)],
           "initial_states@GRAD": [materialize(xp, g, s) for g, s in zip(carry, inits)],
           "parameters@GRAD": [materialize(xp, dparams.get(n), params[n])
                               for n in attrs["param_names"]]}
    return {k: v for k, v in res.items() if k in want}


@kernel("rnn_memory_helper")
def rnn_memory_helper(xp, ins, attrs, want):
    return {"Out": ins["X"]}


@kernel("rnn_memory_helper_grad")
def rnn_memory_helper_grad(xp, ins, attrs, want):
    dout = ins.get("Out@GRAD")
    if dout is None:  # no gradient reached the memory: zeros like X, as fluid
        return {"X@GRAD": xp.zeros(ins["X"].shape, dtype=ins["X"].dtype)}
    return {"X@GRAD": dout}

