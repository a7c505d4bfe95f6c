"""Kernels: control flow over sub-blocks (while, conditional_block, recurrent and their
gradients), branch selection, tensor arrays, is_empty, IfElse's dense split and merge.

A block runs through `ctx.run_block(index, env, xp)` on an env (name -> value) the kernel
builds from its inputs: the block's temporaries are freed as it goes, so a loop holds one
iteration's values at a time. Only when the backward pass asked for them (it binds the op's
StepScopes / Scope / step_scopes output) does a loop keep, per iteration, the values its
state had when the iteration began and the random generator's state: the gradient block
recomputes the iteration from them (with the same random draws), then differentiates it.
A tensor array is a Python list; writing one makes a new list (values are never changed in
place, so a loop's saved states stay what they were).
"""
from __future__ import annotations

import numpy as np

from ..core.lod import lod_key
from ..errors import ExecutionError, InvalidArgumentError
from ..ops import control_flow as _defs  # noqa: F401 - the op definitions these kernels serve
from .registry import kernel
from .tensor import ints_of

# the key the plan reads an untracked variable's LoD from (spmd/executor/lod_binding.NO_LOD):
# every env a block runs on carries it, as the plan's own values do
_NO_LOD = "@NO_LOD"


def _env(*sources) -> dict:
    """A fresh env for one run of a block: `sources` (mappings, later ones winning)."""
    env = {_NO_LOD: None}
    for s in sources:
        env.update(s)
    return env


def _lods(names, lods) -> dict:
    """The LoD of each of `names` under its key, as a block's ops read it (None: none)."""
    return {lod_key(n): lod for n, lod in zip(names, lods or ())}


def _scalar(a, what: str) -> int:
    if isinstance(a, list) or a is None:
        raise InvalidArgumentError(f"{what} must be a one-element tensor, got {type(a).__name__}")
    if a.size != 1:
        raise InvalidArgumentError(
            f"{what} must hold exactly one element, got shape {list(a.shape)}; reduce it (e.g. "
            f"fluid.layers.reduce_all) before using it as a condition")
    return ints_of(a)[0]


def _rng_state(ctx):
    rng = ctx.rng
    return None if rng is None else rng.bit_generator.state


class _RngReplay:
    """Within the block: the generator as it was when the forward iteration began, so a
    recomputation draws the same numbers (dropout masks); afterwards, as it was."""

    def __init__(self, ctx, state):
        self.rng, self.state = ctx.rng, state

    def __enter__(self):
        if self.rng is not None and self.state is not None:
            self.saved = self.rng.bit_generator.state
            self.rng.bit_generator.state = self.state

    def __exit__(self, *exc):
        if self.rng is not None and self.state is not None:
            self.rng.bit_generator.state = self.saved
        return False


def zeros_like_value(xp, v):
    """A zero gradient for value `v`: zeros for a tensor, an array of no gradients (None) for a
    tensor array."""
    if v is None:
        return None
    if isinstance(v, list):
        return [None] * len(v)
    return xp.zeros_like(v)


def add_values(a, b):
    """a + b for gradients where None is zero; tensor arrays element by element."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, list) or isinstance(b, list):
        n = max(len(a), len(b))
        a, b = list(a) + [None] * (n - len(a)), list(b) + [None] * (n - len(b))
        return [add_values(x, y) for x, y in zip(a, b)]
    return a + b


def _materialize(xp, g, like):
    return zeros_like_value(xp, like) if g is None else g


# -- while ------------------------------------------------------------------------------------

@kernel("while", context=True)
def while_(xp, ins, attrs, want, ctx):
    env = _env(zip(attrs["x_names"], ins["X"]), _lods(attrs["x_names"], ins.get("X@LOD")))
    cond = attrs["cond_name"]
    env[cond] = ins["Condition"]
    out_names = attrs["out_names"]
    steps = [] if "StepScopes" in want else None
    while _scalar(env[cond], f"the while loop's condition '{cond}'"):
        if steps is not None:  # the backward pass recomputes this iteration from these
            state = {k: env[k] for n in out_names for k in (n, lod_key(n)) if k in env}
            steps.append((state, _rng_state(ctx)))
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
    x_lods = _lods(x_names, ins.get("X@LOD"))
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
        env = _env(xs, x_lods, values)
        for n, seed in seeds.items():
            g = grad_end[n]
            env[seed] = zeros_like_value(xp, ends.get(n)) if g is None else g
        with _RngReplay(ctx, rng):
            ctx.run_block(attrs["sub_block"], env, xp)
        for n in seeds:
            grad_end[n] = env.get(results[n]) if n in results else None
        for n, r in results.items():
            if n not in written:
                summed[n] = add_values(summed.get(n), env.get(r))
    grads = [grad_end.get(n) if n in written else summed.get(n) for n in x_names]
    return {"X@GRAD": [_materialize(xp, g, xs[n]) for g, n in zip(grads, x_names)]}


# -- conditional_block --------------------------------------------------------------------------

@kernel("conditional_block", context=True)
def conditional_block(xp, ins, attrs, want, ctx):
    conds = ins.get("Cond", [])
    if attrs["is_scalar_condition"]:
        run = bool(_scalar(conds[0], "conditional_block's condition"))
    else:  # fluid: the block runs unless a condition tensor is empty
        run = all(c.size != 0 for c in conds)
    inputs = dict(zip(attrs["input_names"], ins.get("Input", [])))
    rng = _rng_state(ctx) if "Scope" in want else None
    if run:
        env = _env(inputs)
        ctx.run_block(attrs["sub_block"], env, xp)
        outs = [env.get(n) for n in attrs["out_names"]]
    else:  # a variable the block would write keeps the value it had (None: it had none)
        outs = [inputs.get(n) for n in attrs["out_names"]]
    res = {"Out": outs}
    if "Scope" in want:  # and what the block overwrites, as the gradient block reads it
        res["Scope"] = (run, rng, {n: inputs[n] for n in attrs["out_names"] if n in inputs})
    return res


@kernel("conditional_block_grad", context=True)
def conditional_block_grad(xp, ins, attrs, want, ctx):
    run, rng, overwritten = ins["Scope"]
    names = attrs["input_names"]
    inputs = dict(zip(names, ins.get("Input", [])))
    inputs.update(overwritten)
    incoming = dict(zip(attrs["grad_out_names"], ins.get("Out@GRAD", [])))
    if run:
        env = _env(inputs)
        for n, seed in zip(attrs["out_names"], attrs["seed_names"]):
            if seed:
                if incoming.get(n) is None:
                    raise ExecutionError(
                        f"conditional_block_grad: the gradient of '{n}' is missing although "
                        f"its block ran")
                env[seed] = incoming[n]
        with _RngReplay(ctx, rng):
            ctx.run_block(attrs["sub_block"], env, xp)
        grads = [env.get(r) if r else None for r in attrs["result_names"]]
    else:  # the block did not run: what it would have written is what was read
        grads = [incoming.get(n) for n in names]
    return {"Input@GRAD": [_materialize(xp, g, inputs[n]) for g, n in zip(grads, names)]}


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
        env = _env(base, zip(attrs["step_input_names"], [x[t] for x in xs]),
                   zip(attrs["ex_states"], states))
        if keep:
            saved.append((states, _rng_state(ctx)))
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
        env = _env(params, zip(attrs["step_input_names"], [x[t] for x in xs]),
                   zip(attrs["ex_states"], starts))
        for n in attrs["step_output_names"]:
            if seeds.get(n):
                env[seeds[n]] = incoming[n][t]
        for k, n in enumerate(attrs["states"]):
            if seeds.get(n):
                env[seeds[n]] = zeros_like_value(xp, ends[k]) if carry[k] is None else carry[k]
        with _RngReplay(ctx, rng):
            ctx.run_block(attrs["sub_block"], env, xp)
        for k, n in enumerate(attrs["step_input_names"]):
            dxs[k][t] = env.get(results[n]) if results.get(n) else None
        carry = [env.get(results[n]) if results.get(n) else None for n in attrs["ex_states"]]
        for n in attrs["param_names"]:
            if results.get(n):
                dparams[n] = add_values(dparams.get(n), env.get(results[n]))
    res = {"inputs@GRAD": [xp.stack([_materialize(xp, g, x[0]) for g in d])
                           for d, x in zip(dxs, xs)],
           "initial_states@GRAD": [_materialize(xp, g, s) for g, s in zip(carry, inits)],
           "parameters@GRAD": [_materialize(xp, dparams.get(n), params[n])
                               for n in attrs["param_names"]]}
    return {k: v for k, v in res.items() if k in want}


@kernel("rnn_memory_helper")
def rnn_memory_helper(xp, ins, attrs, want):
    return {"Out": ins["X"]}


@kernel("rnn_memory_helper_grad")
def rnn_memory_helper_grad(xp, ins, attrs, want):
    return {"X@GRAD": ins["Out@GRAD"]}


# -- selecting a branch's value -------------------------------------------------------------------

def _branch(mask, count: int, op: str) -> int:
    k = _scalar(mask, f"{op}'s Mask")
    if not 0 <= k < count:
        raise InvalidArgumentError(f"{op}: Mask is {k}, but there are {count} branches")
    return k


@kernel("select_input")
def select_input(xp, ins, attrs, want):
    xs = ins["X"]
    k = _branch(ins["Mask"], len(xs), "select_input")
    if xs[k] is None:
        raise ExecutionError(f"select_input: branch {k} was chosen but computed no value")
    return {"Out": xs[k]}


@kernel("select_input_grad")
def select_input_grad(xp, ins, attrs, want):
    xs = ins["X"]
    k = _branch(ins["Mask"], len(xs), "select_input_grad")
    return {"X@GRAD": [ins["Out@GRAD"] if i == k else None for i in range(len(xs))]}


@kernel("select_output")
def select_output(xp, ins, attrs, want):
    # the outputs after the chosen one are not written (fluid leaves them as they were)
    k = _scalar(ins["Mask"], "select_output's Mask")
    return {"Out": [None] * k + [ins["X"]]}


@kernel("select_output_grad")
def select_output_grad(xp, ins, attrs, want):
    k = _scalar(ins["Mask"], "select_output_grad's Mask")
    douts = ins["Out@GRAD"]
    g = douts[k] if k < len(douts) else None
    return {"X@GRAD": zeros_like_value(xp, ins["X"]) if g is None else g}


# -- tensor arrays --------------------------------------------------------------------------------

def _index(i, op: str) -> int:
    k = _scalar(i, f"{op}'s index I")
    if k < 0:
        raise InvalidArgumentError(f"{op}: index I is {k}; tensor array indices start at 0")
    return k


@kernel("create_array")
def create_array(xp, ins, attrs, want):
    return {"Out": []}


@kernel("write_to_array")
def write_to_array(xp, ins, attrs, want):
    k = _index(ins["I"], "array_write")
    array = list(ins.get("Array") or [])
    if not isinstance(array, list):
        raise InvalidArgumentError("array_write: Array must be a tensor array")
    if k >= len(array):
        array.extend([None] * (k + 1 - len(array)))
    array[k] = ins["X"]
    return {"Out": array, "Out@LOD": _element_lods(ins.get("Array@LOD"), len(array), k,
                                                    ins.get("X@LOD"))}


def _element_lods(lods, length: int, k: int, lod):
    """An array's LoD (its elements' LoDs) with element k's set to `lod`; None while no
    element has one."""
    if lods is None and lod is None:
        return None
    lods = list(lods or ())
    lods.extend([None] * (length - len(lods)))
    lods[k] = lod
    return lods


@kernel("write_to_array_grad")
def write_to_array_grad(xp, ins, attrs, want):
    k = _index(ins["I"], "array_write's gradient")
    dout = ins["Out@GRAD"] or []
    res = {}
    if "X@GRAD" in want:
        g = dout[k] if k < len(dout) else None
        res["X@GRAD"] = xp.zeros_like(ins["X"]) if g is None else g
    if "Array@GRAD" in want:  # element k was overwritten: nothing flows to what it held
        rest = list(dout)
        if k < len(rest):
            rest[k] = None
        res["Array@GRAD"] = rest
    return res


@kernel("read_from_array")
def read_from_array(xp, ins, attrs, want):
    array, k = ins["X"], _index(ins["I"], "array_read")
    if k >= len(array) or array[k] is None:
        raise InvalidArgumentError(
            f"array_read: index {k} of a tensor array of length {len(array)} holds no tensor; "
            f"write it with array_write first")
    lods = ins.get("X@LOD")
    return {"Out": array[k], "Out@LOD": lods[k] if lods and k < len(lods) else None}


@kernel("read_from_array_grad")
def read_from_array_grad(xp, ins, attrs, want):
    array, k = ins["X"], _index(ins["I"], "array_read's gradient")
    grad = [None] * len(array)
    grad[k] = ins["Out@GRAD"]
    return {"X@GRAD": grad}


@kernel("lod_array_length")
def lod_array_length(xp, ins, attrs, want):
    return {"Out": xp.asarray([len(ins["X"])], dtype=np.int64)}


def _array_items(array, op: str) -> list:
    if not array:
        raise InvalidArgumentError(f"{op}: the tensor array is empty")
    missing = [i for i, a in enumerate(array) if a is None]
    if missing:
        raise InvalidArgumentError(f"{op}: elements {missing} of the tensor array were never "
                                   f"written")
    return array


@kernel("tensor_array_to_tensor")
def tensor_array_to_tensor(xp, ins, attrs, want):
    items = _array_items(ins["X"], "tensor_array_to_tensor")
    axis = attrs["axis"]
    if attrs["use_stack"]:
        out = xp.stack(items, axis=axis)
        sizes = [1] * len(items)
    else:
        out = xp.concatenate(items, axis=axis)
        sizes = [a.shape[axis] for a in items]
    return {"Out": out, "OutIndex": xp.asarray(sizes, dtype=np.int32)}


@kernel("tensor_array_to_tensor_grad")
def tensor_array_to_tensor_grad(xp, ins, attrs, want):
    items, dout, axis = ins["X"], ins["Out@GRAD"], attrs["axis"]
    if attrs["use_stack"]:
        ax = axis if axis >= 0 else axis + dout.ndim
        return {"X@GRAD": [xp.take(dout, i, axis=ax) for i in range(len(items))]}
    bounds = np.cumsum([a.shape[axis] for a in items])[:-1].tolist()
    return {"X@GRAD": xp.split(dout, bounds, axis=axis)}


@kernel("sum_tensor_array")
def sum_tensor_array(xp, ins, attrs, want):
    out = None
    for a in ins["X"]:
        out = add_values(out, list(a) if isinstance(a, list) else a)
    return {"Out": out}


# -- is_empty, IfElse's dense split and merge --------------------------------------------------

@kernel("is_empty")
def is_empty(xp, ins, attrs, want):
    return {"Out": xp.asarray([ins["X"].size == 0])}


def _rows(mask, n: int, op: str):
    m = mask.reshape(-1).astype(bool)
    if m.shape[0] != n:
        raise InvalidArgumentError(
            f"{op}: Mask has {m.shape[0]} elements but the input has {n} rows; the mask holds "
            f"one bool per row ([N, 1])")
    return m


@kernel("split_lod_tensor")
def split_lod_tensor(xp, ins, attrs, want):
    x = ins["X"]
    m = _rows(ins["Mask"], x.shape[0], "split_lod_tensor")
    return {"OutTrue": x[m], "OutFalse": x[~m]}


@kernel("split_lod_tensor_grad")
def split_lod_tensor_grad(xp, ins, attrs, want):
    x = ins["X"]
    m = _rows(ins["Mask"], x.shape[0], "split_lod_tensor_grad")
    dx = xp.zeros_like(x)
    if ins.get("OutTrue@GRAD") is not None:
        dx[m] = ins["OutTrue@GRAD"]
    if ins.get("OutFalse@GRAD") is not None:
        dx[~m] = ins["OutFalse@GRAD"]
    return {"X@GRAD": dx}


@kernel("merge_lod_tensor")
def merge_lod_tensor(xp, ins, attrs, want):
    t, f = ins["InTrue"], ins["InFalse"]
    n = ins["X"].shape[0]
    m = _rows(ins["Mask"], n, "merge_lod_tensor")
    if t.shape[0] != int(m.sum()) or f.shape[0] != n - int(m.sum()):
        raise InvalidArgumentError(
            f"merge_lod_tensor: InTrue has {t.shape[0]} rows and InFalse {f.shape[0]}, but the "
            f"mask selects {int(m.sum())} and {n - int(m.sum())}")
    like = t if t.shape[0] else f
    out = xp.empty((n, *like.shape[1:]), dtype=like.dtype)
    out[m] = t
    out[~m] = f
    return {"Out": out}


@kernel("merge_lod_tensor_grad")
def merge_lod_tensor_grad(xp, ins, attrs, want):
    dout = ins["Out@GRAD"]
    m = _rows(ins["Mask"], dout.shape[0], "merge_lod_tensor_grad")
    res = {}
    if "InTrue@GRAD" in want:
        res["InTrue@GRAD"] = dout[m]
    if "InFalse@GRAD" in want:
        res["InFalse@GRAD"] = dout[~m]
    return res
