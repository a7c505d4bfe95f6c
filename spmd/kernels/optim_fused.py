"""Kernels: fused_sgd, fused_momentum, fused_adam (BuildStrategy.fuse_all_optimizer_ops,
spmd/passes/fuse_optimizer.py): one sgd / momentum / adam update over many members'
parameters, gradients and state laid end to end, instead of one small update per parameter.

The update is the unfused op's own kernel called on the flat arrays: each element goes
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

On numpy the members go in runs of at most RUN_BYTES of parameters, one kernel call per run
(a parameter larger than half of it alone, on its own arrays): past that size numpy's
temporaries leave the cache and one long update is slower than several short ones. On a GPU
all go in one run.
"""
from __future__ import annotations

import math
import operator

from ..core.selected_rows import SelectedRows
from .context import KernelContext
from .registry import get_kernel, kernel

_SHARED = ("LearningRate", "Beta1Tensor", "Beta2Tensor")
_POWS = ("Beta1Pow", "Beta2Pow")
# numpy: parameter bytes per run, so that the update's temporaries (adam makes about eight)
# stay in cache. `python bench/fusion.py --chunks` measures it: adam over 1M float32 elements
# took 1.78 ns/element in chunks of 256K elements (1 MiB), 6.55 ns in one call (momentum 0.54
# and 0.64 ns); float64 4.46 ns in chunks of 128K (1 MiB), 9.20 ns in one call.
RUN_BYTES = 1 << 20


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


def _flat(xp, ctx, key, slot: str, arrays):
    """The arrays of `slot` of one run of members as one flat array (see the module doc), or
    None when they cannot be (mixed dtypes)."""
    made = ctx.scratch.get(("out", key, slot + "Out"))  # this slot's output the step before
    if made is not None and _same(arrays, made[0]):
        return made[1]
    seen = ctx.scratch.get(("in", key, slot))  # gradients found end to end the step before
    if seen is not None and _same(arrays, seen[0]):
        return seen[1]
    dtype = arrays[0].dtype
    if any(not isinstance(a, xp.ndarray) or a.dtype != dtype for a in arrays):
        return None
    flat = _end_to_end(xp, arrays)
    if flat is not None:
        ctx.scratch[("in", key, slot)] = (list(arrays), flat)
        return flat
    total = _layout(ctx, arrays)[1]
    buf = ctx.scratch.get(("buf", key, slot))
    if buf is None or buf.size != total or buf.dtype != dtype or not isinstance(buf, xp.ndarray):
        buf = ctx.scratch[("buf", key, slot)] = xp.empty(total, dtype=dtype)
    # the op's own buffer: the update reads it and returns fresh arrays, never a view of it
    xp.concatenate([a.reshape(-1) for a in arrays], out=buf)
    return buf


def _runs(xp, ctx, params) -> list[tuple[int, ...]]:
    """The members updated together, as tuples of indices: on numpy, a parameter larger than
    half of RUN_BYTES alone, the others in member order in runs of at most RUN_BYTES; on a
    GPU, all of them together."""
    key = ("runs", xp.__name__, tuple((p.shape, p.dtype.itemsize) for p in params))
    runs = ctx.scratch.get(key)
    if runs is None:
        if xp.__name__ != "numpy":
            runs = [tuple(range(len(params)))]
        else:
            runs, current, size = [], [], 0
            for i, p in enumerate(params):
                if 2 * p.nbytes > RUN_BYTES:
                    runs.append((i,))
                    continue
                if current and size + p.nbytes > RUN_BYTES:
                    runs.append(tuple(current))
                    current, size = [], 0
                current.append(i)
                size += p.nbytes
            if current:
                runs.append(tuple(current))
        ctx.scratch[key] = runs
    return runs


def _update(xp, base, ins, attrs, want) -> dict:
    """Each member updated by the unfused kernel on its own: output slot -> list."""
    res: dict = {}
    for i in range(len(ins["Param"])):
        one = {s: (v if s in _SHARED else v[i]) for s, v in ins.items()}
        for slot, value in base(xp, one, attrs, want, KernelContext()).items():
            res.setdefault(slot, []).append(value)
    return res


def _update_flat(xp, base, ins, attrs, want, ctx, key) -> dict | None:
    """The members of `ins` (one run) updated by one call of the unfused kernel on their flat
    arrays: output slot -> list of views; None when they cannot be laid end to end."""
    flat = {}
    for slot, arrays in ins.items():
        if slot in _SHARED:
            flat[slot] = arrays
            continue
        f = _flat(xp, ctx, key, slot, arrays)
        if f is None:
            return None
        if slot in _POWS:
            if f.size != len(arrays) or not bool((f == f[0]).all()):
                return None
            f = f[:1]  # every member's power: its one scalar drives the update
        flat[slot] = f
    res = base(xp, flat, attrs, want, KernelContext())
    offsets = _layout(ctx, ins["Param"])[0]
    out = {}
    for slot, value in res.items():
        source = ins[slot[:-len("Out")]]
        if slot[:-len("Out")] in _POWS:  # equal powers give equal products
            value = xp.repeat(value.reshape(-1), len(source))
            views = _split(value, source, range(len(source)))
        else:
            views = _split(value, source, offsets)
        ctx.scratch[("out", key, slot)] = (views, value)
        out[slot] = views
    return out


def _fused_update(kind: str):
    def run(xp, ins, attrs, want, ctx):
        base = get_kernel(kind)
        if any(isinstance(g, SelectedRows) for g in ins["Grad"]):
            return _update(xp, base, ins, attrs, want)
        n = len(ins["Param"])
        out: dict = {}
        for members in _runs(xp, ctx, ins["Param"]):
            part = {s: (v if s in _SHARED else [v[i] for i in members])
                    for s, v in ins.items()}
            res = None
            if len(members) > 1:
                res = _update_flat(xp, base, part, attrs, want, ctx, members)
            if res is None:
                res = _update(xp, base, part, attrs, want)
            for slot, values in res.items():
                column = out.setdefault(slot, [None] * n)
                for i, value in zip(members, values):
                    column[i] = value
        return out

    return run


for _kind in ("sgd", "momentum", "adam"):
    kernel(f"fused_{_kind}", context=True, pure=True)(_fused_update(_kind))
