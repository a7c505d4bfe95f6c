"""In-place updates: the plan lends an op the buffer of an input for an output of the same
variable (Param for ParamOut, Moment1 for Moment1Out, Velocity for VelocityOut), so an update
writes its new values over the old ones instead of into new arrays.

Kernels never modify their inputs on their own (kernels/registry.py): the plan decides. When it
compiles, it finds each op whose kernel declares output slots it may write over its input
(`kernel(..., inplace=...)`) and which writes there a variable it also reads, each in one slot
of its own (`pairs`). When the op runs, it lends the input's array
(KernelContext.lent, for that call only) when nothing but the run itself holds it: a numpy
array that owns its memory (not a view: a sibling view would see the write), writable,
C-contiguous, and referred to exactly by the op's inputs, the run's values and, for a value
read from the scope, the scope. Any other reference blocks the loan: an array a caller took
from the scope (numpy.asarray(scope.find_var(name).get_tensor()), a fetch handed out with
return_numpy=False), a view of it anywhere, the same array under two names or in two slots,
a feed array. So a value a user holds never changes under them. Under the SSA executor
(ssa.py, ExecutionStrategy.num_threads > 1) the same count holds: an op writing a variable
waits for every op reading it, and an op in flight holds its inputs, so an array another
running op may read is never counted alone. Nothing is lent on a GPU, in
a sub-block (its values are its caller's), or under FLAGS_check_nan_inf (a failed check then
leaves the scope as it was).

A run that fails after an op updated in place leaves that update in the scope (as fluid's own
executor, whose updates are in place); the ops before the first update change nothing there.
BuildStrategy.enable_inplace=False turns the loans off; `Plan.memory_report()` counts them.

Spent inputs (`Spend`): a kernel registered with `spends` (sgd's Grad) may also be handed, with
the update loan, an input that dies at its op, to use as its scratch: sgd then writes
Grad * -lr into the gradient itself and adds Param to it in two whole-array operations instead
of a chunk at a time through a scratch buffer (the same operations in the same order, so the
same bits). The same conditions as an activation's loan decide (dies there, written earlier in
the run, one slot, nothing else holds it at run time), and one more array may be spent: a view
of the plan's own fused all-reduce bucket (executor/buckets.py), which the next step writes over
before anything reads it, held by nothing but the bucket, the op's inputs and the run's values.

Activations (`DyingInputs`, fluid's enable_inplace pass): a kernel registered with `reuses`
(relu X -> Out, relu_grad Out@GRAD -> X@GRAD, ...; kernels/registry.py) is lent, as the keyword
`lent`, the buffer of an input that dies at its op: one variable of LEND_MIN_BYTES or more, in
that slot only, dropped right after the op (not persistable, not fetched, no later reader or
writer), written earlier in the same run (not a feed, not a scope value) and not written by
the op. At run time the same reference count decides (the input's slot and the run's values,
nothing else), and the kernel writes there only when the output has exactly the input's shape
and dtype (lent_for). Under the SSA executor an op may run before another reader of the value
it dies at (both only read it), which the count cannot see: there an op is lent an input only
when every other op reading that value is among the ops it waits for, directly or not
(`keep_thread_safe`), so they have all finished when it runs, as in program order.
"""
from __future__ import annotations

import math
import sys
import threading

import numpy as np

from ..record import FrozenRecord, Record


class MemoryOptions(FrozenRecord, frozen=True):
    """What a plan may do to save memory. `inplace`: lend an update its input's buffer, and an
    elementwise op the buffer of an input that dies there (this module); `share`: the program
    was rewritten by the memory_optimize pass (passes/memory_optimize.py), reported only.

    >>> MemoryOptions().inplace
    True
    """

    __slots__ = ("inplace", "share")
    _fields = __slots__

    def __init__(self, inplace: bool = True, share: bool = False):
        object.__setattr__(self, "inplace", inplace)  # frozen: see spmd/record.py
        object.__setattr__(self, "share", share)


class MemoryReport(Record):
    """What a plan's memory options did: `inplace_ops`, the ops that may update in place;
    `lent_last_run`, the buffers lent in the latest run; `lent_total`, in every run so far;
    `reuse_ops`, `reused_last_run`, `reused_total`: the same for the activations, ops that
    may write an output into the buffer of an input dying there (DyingInputs);
    `spent_last_run`, `spent_total`: the dying inputs handed to updates as scratch (Spend,
    sgd's gradient); `stand_ins`,
    the values each run replaces by a shape-only stand-in after their last data reader, as
    only ops reading their shapes remain (liveness.py, stand_in.py).

    >>> MemoryReport().lent_total
    0
    """

    __slots__ = ("inplace_ops", "lent_last_run", "lent_total", "reuse_ops", "reused_last_run",
                 "reused_total", "stand_ins", "spent_last_run", "spent_total")
    _fields = __slots__

    def __init__(self, inplace_ops: int = 0, lent_last_run: int = 0, lent_total: int = 0,
                 reuse_ops: int = 0, reused_last_run: int = 0, reused_total: int = 0,
                 stand_ins: int = 0, spent_last_run: int = 0, spent_total: int = 0):
        self.inplace_ops = inplace_ops
        self.lent_last_run = lent_last_run
        self.lent_total = lent_total
        self.reuse_ops = reuse_ops
        self.reused_last_run = reused_last_run
        self.reused_total = reused_total
        self.stand_ins = stand_ins
        self.spent_last_run = spent_last_run
        self.spent_total = spent_total


def _count(holder: dict, key) -> int:
    return sys.getrefcount(holder[key])


# what _count gives for an object nothing but one dict refers to (calibrated, not assumed: the
# count an access adds differs between Python versions)
_ALONE = _count({"k": object()}, "k")


def lend_pairs(op, opdef, scope_held: set, slots: frozenset) -> tuple:
    """((output slot, input slot, references besides the op's inputs), ...) for each output of
    `op` among `slots` that names the variable of one of its inputs, both single-variable
    slots. The
    references: the run's values hold it, and the scope too for a value read from it
    (`scope_held`: the variables this op is the first in the run to write, read from the
    scope)."""
    single_in = {names[0]: slot for slot, names in op.inputs.items()
                 if len(names) == 1 and not opdef.input_slots[slot].duplicable}
    pairs = []
    for slot, names in op.outputs.items():
        if slot not in slots or len(names) != 1 or opdef.output_slots[slot].duplicable:
            continue
        source = single_in.get(names[0])
        if source is not None and list(op.input_arg_names).count(names[0]) == 1:
            pairs.append((slot, source, 1 + (names[0] in scope_held)))
    return tuple(pairs)


def _alone(ins: dict, slot: str, others: int) -> bool:
    a = ins.get(slot)
    if type(a) is not np.ndarray or a.base is not None:
        return False
    fits = a.flags.writeable and a.flags.c_contiguous
    del a  # (a local name would count as one more reference)
    # (_count's expression inlined: the same count, one call less on every loan)
    return bool(fits) and sys.getrefcount(ins[slot]) == _ALONE + others


_counting = threading.Lock()


class Spend:
    """An input slot of an update whose value dies at the op (see the module doc); `bucket`:
    the fused all-reduce bucket whose view the value may be (set by attach_buckets)."""

    __slots__ = ("slot", "name", "bucket")

    def __init__(self, slot: str, name: str):
        self.slot, self.name, self.bucket = slot, name, None


def _base_count(a) -> int:
    return sys.getrefcount(a.base)


def _probe_base():
    owner = np.empty(4)
    view = owner.reshape(2, 2)
    del owner
    return _base_count(view)


# what _base_count gives for the memory of a view nothing else refers to (calibrated)
_BASE_ALONE = _probe_base()


def _spendable(ins: dict, spend: Spend) -> bool:
    a = ins.get(spend.slot)
    if type(a) is not np.ndarray:
        return False
    base = a.base
    others = 1  # the run's values
    if base is not None:
        if spend.bucket is not None and base is spend.bucket.buffer:
            others = 2  # and the bucket's list of views
        elif type(base) is not np.ndarray or _base_count(a) != _BASE_ALONE + 1:
            return False  # (+1: the local name `base`) another view may see the memory
    fits = a.flags.writeable and a.flags.c_contiguous
    del a, base  # (a local name would count as one more reference)
    return bool(fits) and sys.getrefcount(ins[spend.slot]) == _ALONE + others


def lending(fn, ctx, pairs: tuple, report: MemoryReport, spends: list = ()):
    """`fn` lending, on numpy, each input of `pairs` that nothing else holds to its output,
    and handing it the inputs of `spends` (Spend; read at each call: keep_thread_safe may
    narrow it) that it may write over (KernelContext.spent)."""

    def run(xp, ins, attrs, want):
        if xp is not np:
            return fn(xp, ins, attrs, want)
        lent = {}
        for out, source, others in pairs:  # (a loop: a comprehension is one more call)
            if _alone(ins, source, others):
                lent[out] = ins[source]
        spent = None
        for spend in spends:
            if _spendable(ins, spend):
                if spent is None:
                    spent = {}
                spent[spend.slot] = ins[spend.slot]
        if not lent and spent is None:
            return fn(xp, ins, attrs, want)
        n_lent, n_spent = len(lent), 0 if spent is None else len(spent)
        with _counting:  # updates may run at once (ExecutionStrategy.num_threads)
            report.lent_last_run += n_lent
            report.lent_total += n_lent
            report.spent_last_run += n_spent
            report.spent_total += n_spent
        ctx.lent, ctx.spent_inputs = lent or None, spent
        try:
            return fn(xp, ins, attrs, want)
        finally:
            ctx.lent = ctx.spent_inputs = None  # for this call only: no reference outlives it
    return run


# Activations smaller than this are not lent: a small block comes back from malloc's free lists
# at once (glibc maps a block of its own only from 128 KiB), the peak it saves is a few pages,
# and a loan's checks cost more than the allocation (bench/step.py's chain of 100 scale ops on
# [1] arrays: 1.9 us/op with this bound, 5.4 to 6.0 lending every one); a variable whose
# shape is known to be smaller gets no loan wrapper at all
LEND_MIN_BYTES = 1 << 16


class DyingInputs:
    """Compiles the activation loans of one plan (see the module doc): `bind` wraps each
    kernel as its op is compiled, in program order; `keep_thread_safe` narrows them for the
    SSA executor once every step exists."""

    def __init__(self, report: MemoryReport):
        self.report = report
        self.produced: set[str] = set()  # written by an op compiled so far
        self.loans: list[tuple] = []  # (step index, op, its pairs: a list narrowed in place)
        self.spends: list[tuple] = []  # (step index, op, its Spends: a list narrowed in place)

    def bind(self, fn, op, opdef, k: int, frees, pairs: tuple):
        """`fn` (op `op`'s kernel, step k, declaring `pairs`) lending the inputs that die
        there (`frees`: the values dropped right after it), or `fn` itself."""
        dying = _dying_pairs(op, opdef, pairs, frees, self.produced) if pairs else []
        self.produced.update(op.output_arg_names)
        if not dying:
            return fn
        self.loans.append((k, op, dying))
        self.report.reuse_ops += 1
        return _lending_dying(fn, dying, self.report)

    def spending(self, op, opdef, dies, slots: tuple) -> list:
        """The Spends of op `op` (step k, compiled next; `bind` not yet called for it): its
        input slots among `slots` whose value dies there (`dies`), as for an activation."""
        reads, written = list(op.input_arg_names), set(op.output_arg_names)
        spends = []
        for slot in slots:  # any size: what it saves is the chunk loop's calls
            names = op.inputs.get(slot, ())
            if len(names) != 1 or opdef.input_slots[slot].duplicable:
                continue
            name = names[0]
            if (name in dies and name in self.produced and name not in written
                    and reads.count(name) == 1):
                spends.append(Spend(slot, name))
        return spends

    def note_spends(self, k: int, op, spends: list) -> None:
        if spends:
            self.spends.append((k, op, spends))

    def keep_thread_safe(self, steps, scope_updates=()) -> None:
        """Drop the loans whose input another op reads without this op waiting for it, in the
        graph the SSA executor runs `steps` by."""
        if not self.loans and not self.spends:
            return
        from .ssa import Graph  # (ssa imports nothing of this module)

        graph = Graph(steps, scope_updates)
        preds: list[list] = [[] for _ in steps]
        for j, succs in enumerate(graph.succs):
            for s in succs:
                preds[s].append(j)
        for k, op, dying in self.loans:
            before = _ancestors(preds, k)
            for pair in list(dying):
                name = op.input(pair[1])[0]
                readers = (j for j in range(k) if any(name in names for _, names, _ in
                                                      steps[j].ins))
                if any(j not in before for j in readers):
                    dying.remove(pair)
            if not dying:
                self.report.reuse_ops -= 1
        for k, _op, spends in self.spends:
            before = _ancestors(preds, k)
            for spend in list(spends):
                readers = (j for j in range(k) if any(spend.name in names for _, names, _ in
                                                      steps[j].ins))
                if any(j not in before for j in readers):
                    spends.remove(spend)


def _dying_pairs(op, opdef, pairs: tuple, frees, produced: set) -> list:
    """The pairs of `pairs` whose input dies at `op` (see the module doc)."""
    reads = list(op.input_arg_names)
    written = set(op.output_arg_names)
    dying = []
    for out, source in pairs:
        names, outs = op.inputs.get(source, ()), op.outputs.get(out, ())
        if (len(names) != 1 or len(outs) != 1 or opdef.input_slots[source].duplicable
                or opdef.output_slots[out].duplicable):
            continue
        name = names[0]
        if (name in frees and name in produced and name not in written
                and reads.count(name) == 1 and not _known_small(op.block._var_recursive(name))):
            dying.append((out, source))
    return dying


def _known_small(var) -> bool:
    """Whether `var` has a shape known at compile time (no -1) and under LEND_MIN_BYTES: its
    op then pays nothing for loans it would never get."""
    shape = var.shape
    if shape is None or any(d < 0 for d in shape):
        return False
    try:
        itemsize = np.dtype(var.dtype).itemsize
    except TypeError:  # not an array type: nothing to say
        return False
    return math.prod(shape) * itemsize < LEND_MIN_BYTES


def _ancestors(preds: list, k: int) -> set:
    """The steps step k waits for, directly or through others."""
    seen: set[int] = set()
    stack = list(preds[k])
    while stack:
        j = stack.pop()
        if j not in seen:
            seen.add(j)
            stack.extend(preds[j])
    return seen


def _lending_dying(fn, pairs: list, report: MemoryReport):
    """`fn` called with `lent` (output slot -> the array of an input of `pairs` that nothing
    but the op's inputs and the run's values hold), on numpy; plainly otherwise. `pairs` is
    read at each call: keep_thread_safe may narrow it after the plan is compiled."""

    def run(xp, ins, attrs, want, *ctx):
        if xp is np:
            lent = None
            for out, source in pairs:
                if (getattr(ins[source], "nbytes", 0) >= LEND_MIN_BYTES
                        and (lent is None or out not in lent) and _alone(ins, source, 1)):
                    if lent is None:
                        lent = {}
                    lent[out] = ins[source]
            if lent is not None:
                res = fn(xp, ins, attrs, want, *ctx, lent=lent)
                # counted where the kernel wrote there (it declines a buffer that does not fit)
                used = 0
                for out, array in lent.items():
                    if res.get(out) is array:
                        used += 1
                if used:
                    with _counting:  # ops may run at once (ExecutionStrategy.num_threads)
                        report.reused_last_run += used
                        report.reused_total += used
                return res
        return fn(xp, ins, attrs, want, *ctx)
    return run
