"""How a plan carries LoD: beside each LoD variable's array, its LoD under `lod_key(name)`.

A variable is LoD-tracked when its lod_level is above 0: data variables declared with
`lod_level=`, and what shape inference derived from them (an op's `share_lod` pairs, or a
sequence op's `set_lod_level`). Only tracked variables carry a LoD at run time, and every one
of them always has its key in the plan's values (None: no LoD), so kernels and the step loop
never test for a missing key. Nothing here runs for a program without LoD: its steps are
bound exactly as before.

For one op this module adds to its step:
- the LoD its kernel reads (`lod_inputs`): `ins["X@LOD"]`, None for an untracked variable;
- the LoD its kernel writes (`lod_outputs`): `res["Out@LOD"]`;
- the LoD it passes on (`share_lod`): copied from input to output by a wrapper around the
  kernel, when the output has as many rows as the input (fluid's reshape and reduce share
  only then; an elementwise op always does);
- None for every other tracked output it writes, so a stale LoD never survives a rewrite.
"""
from __future__ import annotations

from ..core.lod import LOD_SUFFIX, lod_key

NO_LOD = "@NO_LOD"  # the key an untracked variable's LoD is read from: always None


def tracked_names(block) -> frozenset[str]:
    """Names visible in `block` (its own and its ancestors' variables) with a LoD level."""
    names = set()
    while block is not None:
        names.update(n for n, v in block.vars.items() if getattr(v, "lod_level", 0) > 0)
        block = block.parent_block
    return frozenset(names)


def _key(name: str, tracked) -> str:
    return lod_key(name) if name in tracked else NO_LOD


def bind_lod(fn, op, opdef, ins: tuple, outs: tuple, tracked: frozenset):
    """(fn, ins, outs) for `op`'s step with its LoD bindings added; unchanged when the op
    touches no LoD."""
    extra_ins, extra_outs, shares, clears = [], [], [], []
    for slot in sorted(opdef.lod_inputs):
        names = op.inputs.get(slot)
        if names:
            dup = opdef.input_slots[slot].duplicable
            extra_ins.append((slot + LOD_SUFFIX, tuple(_key(n, tracked) for n in names), dup))
    written = set()
    for slot in sorted(opdef.lod_outputs):
        names = op.outputs.get(slot)
        if names:
            dup = opdef.output_slots[slot].duplicable
            extra_outs.append((slot + LOD_SUFFIX, tuple(lod_key(n) for n in names), dup))
            written.add(slot)
    for in_slot, out_slot in opdef.share_lod:
        src, dst = op.inputs.get(in_slot), op.outputs.get(out_slot)
        if not src or not dst or out_slot in written or not any(n in tracked for n in dst):
            continue
        source = f"{in_slot}{LOD_SUFFIX}@SHARED"
        extra_ins.append((source, (_key(src[0], tracked),), False))
        dup = opdef.output_slots[out_slot].duplicable
        extra_outs.append((out_slot + LOD_SUFFIX, tuple(lod_key(n) for n in dst), dup))
        shares.append((in_slot, opdef.input_slots[in_slot].duplicable, source, out_slot, dup))
        written.add(out_slot)
    for slot, names in op.outputs.items():
        if slot not in written and any(n in tracked for n in names):
            dup = opdef.output_slots[slot].duplicable
            extra_outs.append((slot + LOD_SUFFIX, tuple(lod_key(n) for n in names), dup))
            clears.append((slot, dup))
    if not (extra_ins or extra_outs):
        return fn, ins, outs
    if shares or clears:
        fn = _passing_lod(fn, tuple(shares), tuple(clears))
    # an input slot bound twice (read and shared) is read once, under either name
    return fn, ins + tuple(extra_ins), outs + tuple(extra_outs)


def _passing_lod(fn, shares: tuple, clears: tuple):
    """`fn` followed by the LoD its op shares from inputs to outputs, and None for the
    tracked outputs it neither writes nor shares a LoD to."""
    def run(xp, ins, attrs, want, *ctx):
        res = fn(xp, ins, attrs, want, *ctx)
        for in_slot, in_dup, source, out_slot, out_dup in shares:
            lod = ins[source]
            if lod is not None:
                rows = int(lod[-1][-1])
                if rows != _rows(ins[in_slot][0] if in_dup else ins[in_slot]):
                    lod = None
            if out_dup:
                res[out_slot + LOD_SUFFIX] = [lod if lod is not None and _rows(o) == rows
                                              else None for o in res[out_slot]]
            else:
                out = res[out_slot]
                res[out_slot + LOD_SUFFIX] = lod if lod is not None and _rows(out) == rows \
                    else None
        for slot, dup in clears:
            res[slot + LOD_SUFFIX] = [None] * len(res[slot]) if dup else None
        return res
    return run


def _rows(array) -> int:
    shape = getattr(array, "shape", ())
    return int(shape[0]) if len(shape) else -1


def with_lod_frees(frees: tuple, tracked: frozenset) -> tuple:
    """`frees` plus the LoD key of every tracked name in it (dropped with its array)."""
    extra = tuple(lod_key(n) for n in frees if n in tracked)
    return frees + extra if extra else frees
