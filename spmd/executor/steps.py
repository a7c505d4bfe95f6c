"""A plan's steps: each op's kernel bound once, when the plan compiles, to what every call of it
needs, so the flat loop (Plan._execute) does nothing per op but gather inputs, call, store
outputs and drop dead values.

The wrappers nest in a fixed order, innermost first: the activation loan (`lent`, a keyword
of the kernel itself), the KernelContext, the NaN/Inf check of the outputs, LoD passing, and
outermost the update loan, which counts the references the run's own inputs hold.
"""
from __future__ import annotations

import functools
import types
from collections.abc import Callable

from ..core.operator import OpRole
from ..kernels.context import KernelContext
from ..kernels.registry import get_kernel, inplace_slots, reuse_pairs, spend_slots, takes_context
from ..ops.registry import get_op_def
from ..record import FrozenRecord
from .inplace import DyingInputs, MemoryReport, lend_pairs, lending
from .lod_binding import bind_lod, with_lod_frees
from .numeric_check import checking

# ops that update parameters: in data parallel every rank must draw the same random numbers
# there (the per-rank generators serve the forward pass: dropout differs per shard)
_UPDATE_ROLES = frozenset({OpRole.OPTIMIZE, OpRole.LR_SCHED, OpRole.AVERAGE})
# code-object flags of *args and **kwargs: inspect.CO_VARARGS and CO_VARKEYWORDS, written out
# so that binding steps does not import inspect (7-8 ms after numpy, python -X importtime)
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08


class Step:
    """One op bound: `frees`, the values dropped after it; `shrinks`, the values a shape-only
    stand-in replaces after it (liveness.py's shrinks_at; empty for most steps)."""

    __slots__ = ("fn", "ins", "outs", "attrs", "want", "frees", "where", "ctx", "shrinks",
                 "spends")

    def __init__(self, fn, ins, outs, attrs, want, frees, where, ctx, shrinks=(), spends=()):
        self.fn, self.ins, self.outs, self.attrs = fn, ins, outs, attrs
        self.want, self.frees, self.where, self.ctx = want, frees, where, ctx
        self.shrinks = shrinks
        self.spends = spends  # inplace.Spend: the dying inputs its update may write over


class Binding(FrozenRecord, frozen=True):
    """What every op of one plan is bound with."""

    __slots__ = ("rng", "update_rng", "comm", "place", "rank_tag", "run_block", "numeric_tag",
                 "lod_aware", "lod_tracked", "inplace", "dying", "report")
    _fields = __slots__

    rng: object
    update_rng: object  # the generator of update ops (the same on every rank), or None: `rng`
    comm: Callable  # the plan's communicator, made on first use
    place: object
    rank_tag: object  # "[rank r/n] ", or the function giving it (called only by ops printing it)
    run_block: Callable  # how a control-flow op runs a sub-block
    numeric_tag: str | None  # FLAGS_check_nan_inf: the tag its errors carry; None: no check
    lod_aware: bool  # some op of the plan reads or passes LoD
    lod_tracked: frozenset  # the variables whose LoD travels beside them
    inplace: bool  # updates may be lent their inputs' buffers
    dying: DyingInputs | None  # activations may be lent the buffers of inputs dying there
    report: MemoryReport  # counts what the loans do

    def __init__(self, rng: object, update_rng: object, comm: Callable, place: object,
                 rank_tag: object, run_block: Callable, numeric_tag: str | None,
                 lod_aware: bool, lod_tracked: frozenset, inplace: bool,
                 dying: DyingInputs | None, report: MemoryReport):
        set_ = object.__setattr__  # frozen: see spmd/record.py
        set_(self, "rng", rng)
        set_(self, "update_rng", update_rng)
        set_(self, "comm", comm)
        set_(self, "place", place)
        set_(self, "rank_tag", rank_tag)
        set_(self, "run_block", run_block)
        set_(self, "numeric_tag", numeric_tag)
        set_(self, "lod_aware", lod_aware)
        set_(self, "lod_tracked", lod_tracked)
        set_(self, "inplace", inplace)
        set_(self, "dying", dying)
        set_(self, "report", report)


def bind_steps(ops, frees_at: dict, scope_reads, binding: Binding,
               shrinks_at: dict | None = None) -> tuple[list, tuple]:
    """The steps of `ops` ((program index, op) pairs) freeing `frees_at`'s values (step index
    -> names) and replacing `shrinks_at`'s by shape-only stand-ins, and the indices of the
    steps that may write over a value read from the scope (the SSA executor keeps those in
    program order)."""
    shrinks_at = shrinks_at or {}
    steps = []
    unwritten = set(scope_reads)  # read from the scope, not yet written by an op
    scope_updates: list[int] = []
    for k, (i, op) in enumerate(ops):
        opdef = get_op_def(op.type)
        attrs = types.MappingProxyType(dict(op.attrs))  # nothing is written at run time
        # an update's draws (Dpsgd's noise) are the same on every rank
        ctx = KernelContext(binding.update_rng if binding.update_rng is not None
                            and op.role in _UPDATE_ROLES else binding.rng,
                            binding.comm, binding.place, binding.rank_tag, binding.run_block, op)
        fn = get_kernel(op.type)
        if binding.dying is not None:  # innermost: the kernel itself takes `lent`
            # a value whose buffer dies here dies for a loan too: later ops read only its shape
            dies = (*frees_at.get(k, ()), *shrinks_at.get(k, ()))
            fn = binding.dying.bind(fn, op, opdef, k, dies, reuse_pairs(op.type))
        if takes_context(op.type):
            fn = _with_context(fn, ctx)
        # a collective queued on the communication thread fills its outputs later: they
        # are checked as the outputs of the c_sync_comm_stream that waits for them
        queued = opdef.collective and not attrs.get("use_calc_stream", True)
        if binding.numeric_tag is not None and not queued:
            fn = checking(fn, (i, op), binding.numeric_tag)
        ins = _bindings(op.inputs, opdef.input_slots)
        outs = _bindings(op.outputs, opdef.output_slots)
        frees = tuple(frees_at.get(k, ()))
        if binding.lod_aware:
            fn, ins, outs = bind_lod(fn, op, opdef, ins, outs, binding.lod_tracked)
            frees = with_lod_frees(frees, binding.lod_tracked)
        slots = inplace_slots(op.type) if binding.inplace else ()
        pairs = lend_pairs(op, opdef, unwritten, slots) if slots else ()
        unwritten.difference_update(op.output_arg_names)
        spends = []
        if pairs and binding.dying is not None and not binding.lod_aware:
            spends = binding.dying.spending(op, opdef, (*frees_at.get(k, ()),),
                                            spend_slots(op.type))
            binding.dying.note_spends(k, op, spends)
        if pairs:  # outermost: it counts the references the run's own `ins` holds
            fn = lending(fn, ctx, pairs, binding.report, spends)
            if any(others > 1 for *_, others in pairs):  # may write over a scope value
                scope_updates.append(k)
            binding.report.inplace_ops += 1
        steps.append(Step(fn, ins, outs, attrs, frozenset(op.outputs), frees, (i, op), ctx,
                          tuple(shrinks_at.get(k, ())), spends))
    return steps, tuple(scope_updates)


def _with_context(fn, ctx):
    """A kernel that takes a KernelContext, bound to `ctx`: the step loop calls every kernel
    alike. A plain function whose fifth parameter is `ctx` is bound by functools.partial
    (no Python frame of its own on every call); any other callable by a wrapper."""
    code = getattr(fn, "__code__", None)
    if (code is not None and code.co_argcount == 5 and code.co_varnames[4] == "ctx"
            and not code.co_flags & (_CO_VARARGS | _CO_VARKEYWORDS)
            and not code.co_kwonlyargcount and not getattr(fn, "__defaults__", None)):
        return functools.partial(fn, ctx=ctx)

    def run(xp, ins, attrs, want):
        return fn(xp, ins, attrs, want, ctx)
    return run


def _bindings(slots: dict, opdef_slots: dict):
    return tuple((s, tuple(names), opdef_slots[s].duplicable) for s, names in slots.items())
