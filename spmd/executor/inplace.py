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
"""
from __future__ import annotations

import sys
import threading
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MemoryOptions:
    """What a plan may do to save memory. `inplace`: lend an update its input's buffer (this
    module); `share`: the program was rewritten by the memory_optimize pass
    (passes/memory_optimize.py), reported only.

    >>> MemoryOptions().inplace
    True
    """

    inplace: bool = True
    share: bool = False


@dataclass
class MemoryReport:
    """What a plan's memory options did: `inplace_ops`, the ops that may update in place;
    `lent_last_run`, the buffers lent in the latest run; `lent_total`, in every run so far.

    >>> MemoryReport().lent_total
    0
    """

    inplace_ops: int = 0
    lent_last_run: int = 0
    lent_total: int = 0


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
    return bool(fits) and _count(ins, slot) == _ALONE + others


_counting = threading.Lock()


def lending(fn, ctx, pairs: tuple, report: MemoryReport):
    """`fn` lending, on numpy, each input of `pairs` that nothing else holds to its output."""

    def run(xp, ins, attrs, want):
        if xp is not np:
            return fn(xp, ins, attrs, want)
        lent = {out: ins[source] for out, source, others in pairs
                if _alone(ins, source, others)}
        if not lent:
            return fn(xp, ins, attrs, want)
        with _counting:  # updates may run at once (ExecutionStrategy.num_threads)
            report.lent_last_run += len(lent)
            report.lent_total += len(lent)
        ctx.lent = lent
        try:
            return fn(xp, ins, attrs, want)
        finally:
            ctx.lent = None  # lent for this call only: no reference outlives it
    return run
