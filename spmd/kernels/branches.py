"""Kernels: choosing between branches: conditional_block and its gradient, select_input /
select_output (how cond merges its branches' values), is_empty, and IfElse's dense
split_lod_tensor / merge_lod_tensor (rows chosen by a [N, 1] bool mask).
"""
from __future__ import annotations

import numpy as np

from ..core.lod import lod_key
from ..errors import ExecutionError, InvalidArgumentError
from .control_flow import (
    RngReplay,
    block_env,
    lod_entries,
    materialize,
    rng_state,
    scalar_int,
    zeros_like_value,
)
from .lod_array import _append, _as_lod, _ranges, sub_lod
from .registry import kernel

# -- conditional_block --------------------------------------------------------------------------

@kernel("conditional_block", context=True)
def conditional_block(xp, ins, attrs, want, ctx):
    conds = ins.get("Cond", [])
    if attrs["is_scalar_condition"]:
        run = bool(scalar_int(conds[0], "conditional_block's condition"))
    else:  # fluid: the block runs unless a condition tensor is empty
        run = all(c.size != 0 for c in conds)
    names, out_names = attrs["input_names"], attrs["out_names"]
    # the inputs with their LoD: a sequence op in the block reads it
    inputs = block_env(zip(names, ins.get("Input", [])), lod_entries(names, ins.get("Input@LOD")))
    rng = rng_state(ctx) if "Scope" in want else None
    # a variable the block would write keeps the value it had (None: it had none)
    env = block_env(inputs)
    if run:
        ctx.run_block(attrs["sub_block"], env, xp)
    res = {"Out": [env.get(n) for n in out_names],
           "Out@LOD": [env.get(lod_key(n)) for n in out_names]}
    if "Scope" in want:  # and what the block overwrites, as the gradient block reads it
        res["Scope"] = (run, rng, {k: inputs[k] for n in out_names
                                   for k in (n, lod_key(n)) if k in inputs})
    return res


@kernel("conditional_block_grad", context=True)
def conditional_block_grad(xp, ins, attrs, want, ctx):
    run, rng, overwritten = ins["Scope"]
    names = attrs["input_names"]
    inputs = block_env(zip(names, ins.get("Input", [])), lod_entries(names, ins.get("Input@LOD")),
                       overwritten)
    incoming = dict(zip(attrs["grad_out_names"], ins.get("Out@GRAD", [])))
    if run:
        env = block_env(inputs)
        for n, seed in zip(attrs["out_names"], attrs["seed_names"]):
            if seed:
                if incoming.get(n) is None:
                    raise ExecutionError(
                        f"conditional_block_grad: the gradient of '{n}' is missing although "
                        f"its block ran")
                env[seed] = incoming[n]
        with RngReplay(ctx, rng):
            ctx.run_block(attrs["sub_block"], env, xp)
        grads = [env.get(r) if r else None for r in attrs["result_names"]]
    else:  # the block did not run: what it would have written is what was read
        grads = [incoming.get(n) for n in names]
    return {"Input@GRAD": [materialize(xp, g, inputs[n]) for g, n in zip(grads, names)]}



# -- selecting a branch's value -------------------------------------------------------------------

def _branch(mask, count: int, op: str) -> int:
    k = scalar_int(mask, f"{op}'s Mask")
    if not 0 <= k < count:
        raise InvalidArgumentError(f"{op}: Mask is {k}, but there are {count} branches")
    return k


@kernel("select_input")
def select_input(xp, ins, attrs, want):
    xs = ins["X"]
    k = _branch(ins["Mask"], len(xs), "select_input")
    if xs[k] is None:
        raise ExecutionError(f"select_input: branch {k} was chosen but computed no value")
    lods = ins.get("X@LOD")
    return {"Out": xs[k], "Out@LOD": lods[k] if lods else None}


@kernel("select_input_grad")
def select_input_grad(xp, ins, attrs, want):
    xs = ins["X"]
    k = _branch(ins["Mask"], len(xs), "select_input_grad")
    return {"X@GRAD": [ins["Out@GRAD"] if i == k else None for i in range(len(xs))]}


@kernel("select_output", context=True)
def select_output(xp, ins, attrs, want, ctx):
    # the other outputs hold no value (fluid leaves them unset): select_input, which reads
    # them all, then finds each bound and takes only the chosen one
    k = scalar_int(ins["Mask"], "select_output's Mask")
    n = max(len(ctx.op.outputs.get("Out", ())) if ctx.op is not None else 0, k + 1)
    return {"Out": [ins["X"] if i == k else None for i in range(n)],
            "Out@LOD": [ins.get("X@LOD") if i == k else None for i in range(n)]}


@kernel("select_output_grad")
def select_output_grad(xp, ins, attrs, want):
    k = scalar_int(ins["Mask"], "select_output_grad's Mask")
    douts = ins["Out@GRAD"]
    g = douts[k] if k < len(douts) else None
    return {"X@GRAD": zeros_like_value(xp, ins["X"]) if g is None else g}



# -- is_empty, IfElse's dense split and merge --------------------------------------------------

@kernel("is_empty")
def is_empty(xp, ins, attrs, want):
    return {"Out": xp.asarray([ins["X"].size == 0])}


def _units(mask, lod, level: int, rows: int, op: str):
    """(mask as bool, row index of the true units, of the false units, their LoDs): a unit is
    a row without LoD, else a sequence of LoD level `level` with its sub-sequences (fluid's
    GetSubLoDAndAbsoluteOffset)."""
    m = mask.reshape(-1).astype(bool)
    if lod is None:
        if m.shape[0] != rows:
            raise InvalidArgumentError(
                f"{op}: Mask has {m.shape[0]} elements but the input has {rows} rows; the "
                f"mask holds one bool per row ([N, 1]), or per sequence of a LoD input")
        idx = np.arange(rows)
        return m, idx[m], idx[~m], None, None
    if not 0 <= level < len(lod):
        raise InvalidArgumentError(
            f"{op}: level {level} is outside the input's {len(lod)} LoD level(s)")
    units = len(lod[level]) - 1
    if m.shape[0] != units:
        raise InvalidArgumentError(
            f"{op}: Mask has {m.shape[0]} elements but LoD level {level} of the input has "
            f"{units} sequences; the mask holds one bool per sequence")
    pairs, levels = ([], []), ([], [])
    for i, keep in enumerate(m):
        lengths, b, e = sub_lod(lod, i, i + 1, level)
        side = 0 if keep else 1
        pairs[side].append((b, e))
        _append(levels[side], lengths)
    return (m, _ranges(pairs[0]), _ranges(pairs[1]), _as_lod(levels[0]),
            _as_lod(levels[1]))


@kernel("split_lod_tensor")
def split_lod_tensor(xp, ins, attrs, want):
    x = ins["X"]
    _, t, f, t_lod, f_lod = _units(ins["Mask"], ins.get("X@LOD"), attrs["level"], x.shape[0],
                                   "split_lod_tensor")
    return {"OutTrue": x[xp.asarray(t)], "OutFalse": x[xp.asarray(f)],
            "OutTrue@LOD": t_lod, "OutFalse@LOD": f_lod}


@kernel("split_lod_tensor_grad")
def split_lod_tensor_grad(xp, ins, attrs, want):
    x = ins["X"]
    _, t, f, _, _ = _units(ins["Mask"], ins.get("X@LOD"), attrs["level"], x.shape[0],
                           "split_lod_tensor_grad")
    dx = xp.zeros_like(x)
    if ins.get("OutTrue@GRAD") is not None:
        dx[xp.asarray(t)] = ins["OutTrue@GRAD"]
    if ins.get("OutFalse@GRAD") is not None:
        dx[xp.asarray(f)] = ins["OutFalse@GRAD"]
    return {"X@GRAD": dx}


def _merge(xp, ins, attrs, op: str):
    tv, fv = ins["InTrue"], ins["InFalse"]
    x, lod = ins["X"], ins.get("X@LOD")
    m, t, f, _, _ = _units(ins["Mask"], lod, attrs["level"], x.shape[0], op)
    if tv.shape[0] != len(t) or fv.shape[0] != len(f):
        raise InvalidArgumentError(
            f"{op}: InTrue has {tv.shape[0]} rows and InFalse {fv.shape[0]}, but the mask "
            f"selects {len(t)} and {len(f)}")
    like = tv if tv.shape[0] else fv
    out = xp.empty((len(t) + len(f), *like.shape[1:]), dtype=like.dtype)
    out[xp.asarray(t)] = tv
    out[xp.asarray(f)] = fv
    return {"Out": out, "Out@LOD": lod}


@kernel("merge_lod_tensor")
def merge_lod_tensor(xp, ins, attrs, want):
    return _merge(xp, ins, attrs, "merge_lod_tensor")


@kernel("merge_lod_tensor_infer")
def merge_lod_tensor_infer(xp, ins, attrs, want):
    return _merge(xp, ins, attrs, "merge_lod_tensor_infer")


@kernel("merge_lod_tensor_grad")
def merge_lod_tensor_grad(xp, ins, attrs, want):
    dout = ins["Out@GRAD"]
    _, t, f, _, _ = _units(ins["Mask"], ins.get("X@LOD"), attrs["level"], dout.shape[0],
                           "merge_lod_tensor_grad")
    res = {}
    if "InTrue@GRAD" in want:
        res["InTrue@GRAD"] = dout[xp.asarray(t)]
    if "InFalse@GRAD" in want:
        res["InFalse@GRAD"] = dout[xp.asarray(f)]
    return res
