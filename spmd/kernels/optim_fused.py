"""Kernels: fused_sgd, fused_momentum, fused_adam (BuildStrategy.fuse_all_optimizer_ops,
spmd/passes/fuse_optimizer.py): one sgd / momentum / adam update over every member's
parameter, gradient and state laid end to end, instead of one small update per parameter.

The update is the unfused op's own kernel called once on the flat arrays: each element goes
through the same operations, so every member's result is bitwise the unfused one. Each output
is one fresh flat array (as the unfused kernels return fresh arrays) and each member's output
a view of it, so the scope holds every parameter and every state variable by name as before.

The next step's inputs are those views (the plan commits them to the scope and reads them
back): recognised by identity, their flat array is used as it is, so after the first step
(or after a load) laying the parameters and state end to end costs nothing. Gradients that
already lie end to end (views of a fused all-reduce bucket in member order) are used in
place; otherwise they are copied into one flat buffer kept by the op. Beta powers are one
per member: when all are equal (always, unless a checkpoint mixed them) one scalar drives the
update; otherwise, and for sparse gradients, each member is updated on its own.
"""
from __future__ import annotations

import math
import operator

from ..core.selected_rows import SelectedRows
from .context import KernelContext
from .registry import get_kernel, kernel

_SHARED = ("LearningRate", "Beta1Tensor", "Beta2Tensor")
_POWS = ("Beta1Pow", "Beta2Pow")


def _layout(ctx, arrays) -> tuple:
    """(offsets, total) of `arrays` laid end to end, kept while their shapes hold."""
    shapes = tuple(a.shape for a in arrays)
    cached = ctx.scratch.get(("layout", len(arrays), shapes))
    if cached is None:
        offsets, total = [], 0
        for shape in shapes:
            offsets.append(total)
            total += math.prod(shape)
        cached = ctx.scratch[("layout", len(arrays), shapes)] = (offsets, total)
    return cached


def _split(flat, arrays, offsets) -> list:
    """Views of `flat`, one per member, shaped as `arrays`."""
    return [flat[o:o + a.size].reshape(a.shape) for a, o in zip(arrays, offsets)]


def _same(arrays, views) -> bool:
    return len(arrays) == len(views) and all(map(operator.is_, arrays, views))


def _end_to_end(xp, arrays):
    """A flat view of one buffer in which `arrays` lie end to end in order, or None."""
    first = arrays[0]
    base = first.base
    if base is None or not isinstance(base, xp.ndarray) or not base.flags.c_contiguous:
        return None
    if xp.__name__ != "numpy":
        return None
    start = pos = first.__array_interface__["data"][0]
    for a in arrays:
        if (a.base is not base or a.dtype != first.dtype or not a.flags.c_contiguous
                or a.__array_interface__["data"][0] != pos):
            return None
        pos += a.nbytes
    offset = (start - base.__array_interface__["data"][0]) // first.itemsize
    return base.reshape(-1)[offset:offset + (pos - start) // first.itemsize]


def _flat(xp, ctx, slot: str, arrays):
    """The members' arrays of `slot` as one flat array (see the module doc), or None when
    they cannot be (a sparse gradient, mixed dtypes)."""
    made = ctx.scratch.get(("out", slot + "Out"))  # this slot's output the step before
    if made is not None and _same(arrays, made[0]):
        return made[1]
    seen = ctx.scratch.get(("in", slot))  # gradients found end to end the step before
    if seen is not None and _same(arrays, seen[0]):
        return seen[1]
    dtype = arrays[0].dtype if isinstance(arrays[0], xp.ndarray) else None
    if dtype is None or any(not isinstance(a, xp.ndarray) or a.dtype != dtype for a in arrays):
        return None
    flat = _end_to_end(xp, arrays) if len(arrays) > 1 else None
    if flat is not None:
        ctx.scratch[("in", slot)] = (list(arrays), flat)
        return flat
    total = _layout(ctx, arrays)[1]
    buf = ctx.scratch.get(("buf", slot))
    if buf is None or buf.size != total or buf.dtype != dtype or not isinstance(buf, xp.ndarray):
        buf = ctx.scratch[("buf", slot)] = xp.empty(total, dtype=dtype)
    # the op's own buffer: the update reads it and returns fresh arrays, never a view of it
    xp.concatenate([a.reshape(-1) for a in arrays], out=buf)
    return buf


def _one_by_one(xp, base, ins, attrs, want):
    """Each member updated by the unfused kernel on its own."""
    res: dict = {}
    for i in range(len(ins["Param"])):
        one = {s: (v if s in _SHARED else v[i]) for s, v in ins.items()}
        for slot, value in base(xp, one, attrs, want, KernelContext()).items():
            res.setdefault(slot, []).append(value)
    return res


def _fused_update(kind: str):
    def run(xp, ins, attrs, want, ctx):
        base = get_kernel(kind)
        params = ins["Param"]
        flat = {}
        for slot, arrays in ins.items():
            if slot in _SHARED:
                flat[slot] = arrays
                continue
            if any(isinstance(a, SelectedRows) for a in arrays):
                return _forget(ctx, _one_by_one(xp, base, ins, attrs, want))
            f = _flat(xp, ctx, slot, arrays)
            if f is None:
                return _forget(ctx, _one_by_one(xp, base, ins, attrs, want))
            flat[slot] = f
        for slot in _POWS:
            if slot in flat:
                pows = flat[slot]
                if pows.size != len(params) or not bool((pows == pows[0]).all()):
                    return _forget(ctx, _one_by_one(xp, base, ins, attrs, want))
                flat[slot] = pows[:1]  # every member's; its one scalar drives the update
        res = base(xp, flat, attrs, want, KernelContext())
        offsets = _layout(ctx, params)[0]
        out = {}
        for slot, value in res.items():
            source = ins[slot[:-len("Out")]]
            if slot[:-len("Out")] in _POWS:  # equal powers give equal products
                value = xp.repeat(value.reshape(-1), len(source))
                views = _split(value, source, range(len(source)))
            else:
                views = _split(value, source, offsets)
            ctx.scratch[("out", slot)] = (views, value)
            out[slot] = views
        return out

    return run


def _forget(ctx, res: dict) -> dict:
    """After a step updated member by member: no flat output of an earlier step to recognise."""
    for key in [k for k in ctx.scratch if k[0] == "out"]:
        del ctx.scratch[key]
    return res


for _kind in ("sgd", "momentum", "adam"):
    kernel(f"fused_{_kind}", context=True)(_fused_update(_kind))
