"""RecomputeOptimizer's rewrite of a backward pass, as fluid 1.8's
_append_backward_ops_with_checkpoints_ builds it: the forward ops are cut into segments at the
checkpoints, and before the gradient ops of each segment the backward pass runs again the
forward ops of that segment whose outputs are not kept (renamed `<var>.subprog_<i>`), so the
gradient ops read the recomputed values and the forward ones can be freed early.

Segments (fluid's rules, over the forward ops): one checkpoint -> [0, its producer + 1) when its
producer is not op 0; several, sorted by producer -> [first consumer of checkpoint k, producer
of checkpoint k+1 + 1) for each pair where that range is not empty, with [0, first start)
prepended. Kept in memory: checkpoints, parameters and other persistables, the program's inputs
and every variable that crosses a segment's boundary. An op with a sub-block cannot be
recomputed (fluid refuses it too).

Before the backward pass, each dropout without a Seed input gets a `seed` op in front of it
(its fix_seed seed, else a fresh one each run), as fluid does, so that its recomputation draws
the forward pass's mask. Other random ops (no Seed input) keep their outputs in memory instead
of being recomputed, so their gradients are those of the forward pass's draw.
"""
from __future__ import annotations

from ..core import unique_name
from ..core.operator import OpRole
from ..errors import InvalidArgumentError
from ..ops.registry import get_op_def

GRAD = "@GRAD"


def _producers_consumers(ops):
    produced, consumed = {}, {}
    for i, op in enumerate(ops):
        for n in op.input_arg_names:
            consumed.setdefault(n, []).append(i)
        for n in op.output_arg_names:
            produced.setdefault(n, []).append(i)
    return produced, consumed


def _segments(ops, checkpoints, produced, consumed):
    known = [c for c in checkpoints if c in produced or c in consumed]
    order = sorted(known, key=lambda c: max(produced.get(c, [-1])))
    segments = []
    if len(order) == 1:
        last = max(produced.get(order[0], [-1]))
        if last > 0:
            segments.append((0, last + 1))
    else:
        for a, b in zip(order, order[1:]):
            lo = min(consumed.get(a, [len(ops)]))
            hi = max(produced.get(b, [-1]))
            if lo < hi:
                segments.append((lo, hi + 1))
    if segments and segments[0][0] != 0:
        segments.insert(0, (0, segments[0][0]))
    return segments


def _held(ops, segments, produced, consumed, block):
    """Variables kept in memory: those crossing a segment boundary, the outputs of random ops,
    the program's inputs (produced by no forward op) and persistables."""
    held = set()
    for lo, hi in segments:
        for op in ops[lo:hi]:
            held.update(n for n in op.output_arg_names
                        if any(i >= hi for i in consumed.get(n, ())))
            held.update(n for n in op.input_arg_names
                        if any(i < lo for i in produced.get(n, ())))
    for op in ops:
        if get_op_def(op.type).random and not op.inputs.get("Seed"):
            held.update(op.output_arg_names)  # the seed op's value among them
        held.update(n for n in op.input_arg_names if n not in produced)
    held.update(n for n in produced.keys() | consumed.keys()
                if (v := block._find_var_recursive(n)) is not None and v.persistable)
    return held


def insert_dropout_seeds(block) -> None:
    """fluid's modify_forward_desc_for_recompute: a `seed` op before each dropout that has no
    Seed input, feeding it (fix_seed's seed, else 0: a fresh seed each run)."""
    i = 0
    while i < len(block.ops):
        op = block.ops[i]
        if op.type == "dropout" and not op.inputs.get("Seed"):
            name = unique_name.generate(unique_name.generate("seed") + ".tmp")
            block.create_var(name=name, shape=[1], dtype="int32", stop_gradient=True)
            value = int(op.attrs.get("seed", 0)) if op.attrs.get("fix_seed") else 0
            block._insert_op(i, "seed", outputs={"Out": [name]}, attrs={"seed": value},
                             role=op.role)
            dropout = block.ops[i + 1]
            block._remove_op(i + 1)
            block._insert_op(i + 1, "dropout", dict(dropout.inputs, Seed=[name]),
                             dict(dropout.outputs), dict(dropout.attrs), role=dropout.role)
            i += 1
        i += 1


def _forward_of(grad_ops, ops):
    """Forward op index of each backward op that is one op's gradient (`<type>_grad` reading
    only that op's variables besides gradients), matched from the last forward op back."""
    owner, taken = {}, set()
    for g_idx, g in enumerate(grad_ops):
        if not g.type.endswith("_grad"):
            continue
        reads = {n for n in g.input_arg_names if GRAD not in n}
        for f_idx in range(len(ops) - 1, -1, -1):
            f = ops[f_idx]
            if f_idx in taken or f.type + "_grad" != g.type:
                continue
            if reads <= set(f.input_arg_names) | set(f.output_arg_names):
                owner[g_idx] = f_idx
                taken.add(f_idx)
                break
    return owner


def apply_recompute(block, n_forward: int, checkpoints) -> int:
    """Rewrite the backward ops after the first `n_forward` ops of `block`; returns how many
    forward ops were added for recomputation."""
    ops = list(block.ops[:n_forward])
    ops = [op for op in ops if op.role is OpRole.FORWARD]
    for op in ops:
        if "sub_block" in op.attrs:
            raise InvalidArgumentError(
                f"RecomputeOptimizer: op '{op.type}' runs a sub-block; fluid 1.8's recompute "
                f"does not support ops with sub-blocks either: put no checkpoint around it")
    names = [c.name if hasattr(c, "name") else c for c in checkpoints]
    produced, consumed = _producers_consumers(ops)
    segments = _segments(ops, names, produced, consumed)
    if not segments:
        return 0
    keep = _held(ops, segments, produced, consumed, block) | set(names)
    backward = list(block.ops[n_forward:])
    owner = _forward_of(backward, ops)
    renames: dict[str, str] = {}
    plan = []  # (segment index in reverse order, forward ops to recompute, rename map)
    for i, (lo, hi) in enumerate(reversed(segments)):
        for op in ops[lo:hi]:
            for n in (*op.input_arg_names, *op.output_arg_names):
                if n not in keep and n not in renames:
                    renames[n] = f"{n}.subprog_{i}"
        again = [op for op in ops[lo:hi] if any(n not in keep for n in op.output_arg_names)]
        plan.append((lo, hi, again, dict(renames)))
    added = 0
    for lo, hi, again, table in plan:
        members = [g for g, f in owner.items() if lo <= f < hi]
        if not members:
            continue
        first = min(members)
        at = n_forward + added + first
        for op in again:
            _declare(block, op, table)
            block._insert_op(at, op.type, _renamed(op.inputs, table), _renamed(op.outputs, table),
                             dict(op.attrs), role=OpRole.BACKWARD)
            at += 1
            added += 1
        for g in members:
            pos = n_forward + added + g
            grad = block.ops[pos]
            if not any(n in table for n in grad.input_arg_names):
                continue
            block._remove_op(pos)
            block._insert_op(pos, grad.type, _renamed(grad.inputs, table), dict(grad.outputs),
                             dict(grad.attrs), role=grad.role)
    return added


def _renamed(slots, table):
    return {slot: [table.get(n, n) for n in names] for slot, names in slots.items()}


def _declare(block, op, table):
    for n in op.output_arg_names:
        new = table.get(n)
        if new is not None and not block.has_var(new):
            v = block._var_recursive(n)
            block.create_var(name=new, shape=v.shape, dtype=v.dtype, lod_level=v.lod_level,
                             stop_gradient=True)
