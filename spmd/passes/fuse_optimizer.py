"""BuildStrategy.fuse_all_optimizer_ops: the sgd, momentum or adam updates of many parameters
become one fused_sgd / fused_momentum / fused_adam each, as fluid 1.8's fuse_sgd_op_pass,
fuse_momentum_op_pass and fuse_adam_op_pass do: one update over every member laid end to end
(spmd/kernels/optim_fused.py), bitwise the per-parameter updates.

Updates fuse when they share their kind, attributes, learning rate (and adam's beta tensors),
dtype and, in Reduce mode, their owner rank; dense gradients only (a sparse one, an
embedding's, keeps its own op). With fused gradient collectives (fuse_all_reduce_ops) one
fused update is made per gradient bucket, its members in the bucket's order, so the
gradients it reads already lie end to end in the bucket (no packing copy). It runs after the
data-parallel passes: in Reduce mode it fuses each owner's updates of its pieces; the
all-gather then copies the new pieces in, where an unfused update would have written there.

Parameters and optimizer state stay variables of their own names (views of the fused arrays),
so saving, loading and fetching them work as without the pass.
"""
from __future__ import annotations

from collections import defaultdict

from ..core.operator import OpRole
from ..ops.fused import FUSED_UPDATES, SHARED_SLOTS
from .common import make_op
from .fusion import DataFlow, rewrite
from .registry import register_pass
from .sparse_grads import sparse_gradients

_COMMON = ("op_namescope", "op_callstack", "op_device")  # per-op notes, not semantics


def _updates_in_place(op) -> bool:
    """Each state output written back to its input (ParamOut = Param, Moment1Out = Moment1)."""
    return all(op.output(s) == op.input(s[:-len("Out")]) for s in op.outputs)


def _bucket_positions(block) -> dict:
    """gradient -> (index of its fused collective, place in it): fused all-reduce buckets and
    Reduce mode's reduce-scatters."""
    pos = {}
    for k, op in enumerate(block.ops):
        if op.type == "c_allreduce_sum" and len(op.input("X")) > 1:
            names = op.output("Out")
        elif op.type == "c_reduce_scatter_owned":
            names = op.output("Out")
        else:
            continue
        for j, n in enumerate(names):
            pos.setdefault(n, (k, j))
    return pos


def _groups(program, flow: DataFlow) -> list[list[int]]:
    """Indices of the update ops that may fuse, one list per fused op, in member order."""
    block = flow.block
    sparse = sparse_gradients(program)
    pos = _bucket_positions(block)
    groups: dict[tuple, list] = defaultdict(list)
    for i, op in enumerate(block.ops):
        if (op.role is not OpRole.OPTIMIZE or op.type not in FUSED_UPDATES
                or op.input("Grad")[0] in sparse or not _updates_in_place(op)):
            continue
        where = pos.get(op.input("Grad")[0])
        attrs = tuple(sorted((k, repr(v)) for k, v in op.attrs.items() if k not in _COMMON))
        key = (op.type, op.owner, tuple(tuple(op.input(s)) for s in SHARED_SLOTS),
               block._var_recursive(op.input("Param")[0]).dtype, attrs,
               where[0] if where else None)
        groups[key].append((where[1] if where else i, i))
    return [[i for _, i in sorted(members)] for members in groups.values()]


def _movable(flow: DataFlow, members: list[int]) -> list[int]:
    """The members that may all run at the place of the last one: each, moved there, reads
    and writes what it did (no op between changes its inputs or sees its outputs), and no
    two share a variable but the learning rate (and adam's beta tensors); checked again
    without the ones left out, until none is."""
    members = sorted(members)
    while len(members) > 1:
        end, skip = members[-1], set(members)
        seen: set[str] = set()
        bad = set()
        for i in members:
            mine = flow.reads[i] | flow.writes[i]
            shared_ok = mine - set(_shared_inputs(flow.op(i)))
            if shared_ok & seen or (i != end and not flow.can_sink(i, end, skip)):
                bad.add(i)
            seen |= shared_ok
        if not bad:
            return members
        members = [i for i in members if i not in bad]
    return members


def _shared_inputs(op) -> list[str]:
    return [n for s in SHARED_SLOTS for n in op.input(s)]


def fuse_optimizer_ops(program) -> int:
    """Rewrite `program` in place; returns how many fused updates were made."""
    flow = DataFlow(program)
    block = flow.block
    placed, removed = {}, set()
    for group in _groups(program, flow):
        members = set(_movable(flow, group))
        if len(members) < 2:
            continue
        ops = [flow.op(i) for i in group if i in members]  # in bucket order
        first = ops[0]
        inputs = {s: [n for op in ops for n in op.input(s)] for s in first.inputs
                  if s not in SHARED_SLOTS}
        inputs.update({s: first.input(s) for s in SHARED_SLOTS if first.input(s)})
        outputs = {s: [n for op in ops for n in op.output(s)] for s in first.outputs}
        attrs = {k: v for k, v in first.attrs.items() if k not in _COMMON}
        end = max(members)
        placed[end] = make_op(block, FUSED_UPDATES[first.type], inputs, outputs, attrs,
                              OpRole.OPTIMIZE, owner=first.owner)
        removed |= members
    rewrite(block, removed - set(placed), placed)
    return len(placed)


# after the data-parallel passes (30), which place collectives and owners by the plain updates
@register_pass("fuse_all_optimizer_ops", order=40, fields=("fuse_all_optimizer_ops",),
               one_place=True,
               when=lambda ctx: ctx.strategy.fuse_all_optimizer_ops and ctx.training)
def fuse_optimizer_pass(ctx) -> None:
    """BuildStrategy.fuse_all_optimizer_ops: fuse_optimizer_ops."""
    fuse_optimizer_ops(ctx.program)
