"""How an optimizer kernel takes a sparse (SelectedRows) gradient, declared where the kernel
is registered: `@kernel("sgd", sparse=SparseRule(rows_only=True))`.

Row-wise optimizers (SGD, lazy Adam, Adagrad, FTRL: fluid 1.8.5's sparse kernels, or FTRL's
rows-only rule) change only the looked-up rows: the gradient is merged (each row once, a sort
of the batch's ids: never anything of the table's size), the parameter's and its state's rows
are gathered, the kernel's own dense update runs on them, and the new rows are written back
in place into the arrays the plan lends (KernelContext.out; executor/inplace.py), so a step
costs its rows, not its table (Plan.memory_report() counts the loans). Optimizers with dense
semantics (Momentum, Adam without lazy_mode, RMSProp, DecayedAdagrad: every row changes,
looked up or not) apply the gradient as its dense table.
"""
from __future__ import annotations

from collections.abc import Callable

from ..core.selected_rows import SelectedRows
from ..record import FrozenRecord


class SparseRule(FrozenRecord, frozen=True):
    """rows_only: True, False, or a function of the op's attributes (adam's lazy_mode);
    state: (input slot, output slot) of the arrays with one row per parameter row."""

    __slots__ = ("rows_only", "state", "grad_slot")
    _fields = __slots__

    def __init__(self, rows_only: bool | Callable = False,
                 state: tuple[tuple[str, str], ...] = (("Param", "ParamOut"),),
                 grad_slot: str = "Grad"):
        set_ = object.__setattr__  # frozen: see spmd/record.py
        set_(self, "rows_only", rows_only)
        set_(self, "state", state)
        set_(self, "grad_slot", grad_slot)


class SparseValues(FrozenRecord, frozen=True):
    """For ops gradient clipping applies to a gradient (clip, clip_by_norm, the global norm's
    squared_l2_norm and elementwise_mul by its scale): a SelectedRows input `slot` is merged
    (each row once, so norms and clips see the dense table's rows) and the kernel runs on its
    values; with `wrap`, output `out` is those rows with the kernel's values."""

    __slots__ = ("slot", "out", "wrap")
    _fields = __slots__

    def __init__(self, slot: str = "X", out: str = "Out", wrap: bool = True):
        set_ = object.__setattr__  # frozen: see spmd/record.py
        set_(self, "slot", slot)
        set_(self, "out", out)
        set_(self, "wrap", wrap)


def taking_sparse(fn, rule):
    """`fn` that also takes a SelectedRows input by `rule` (a SparseRule or SparseValues)."""
    if isinstance(rule, SparseValues):
        return _on_values(fn, rule)

    def run(xp, ins, attrs, want, *ctx):
        if isinstance(ins.get(rule.grad_slot), SelectedRows):
            rows_only = rule.rows_only(attrs) if callable(rule.rows_only) else rule.rows_only
            return sparse_update(fn, xp, ins, attrs, want, ctx[0] if ctx else None,
                                 rows_only=rows_only, state=rule.state,
                                 grad_slot=rule.grad_slot)
        return fn(xp, ins, attrs, want, *ctx)
    run.dense = fn
    return run


def _on_values(fn, rule: SparseValues):
    def run(xp, ins, attrs, want, *ctx):
        x = ins.get(rule.slot)
        if not isinstance(x, SelectedRows):
            return fn(xp, ins, attrs, want, *ctx)
        merged = x.merged(xp)
        res = fn(xp, dict(ins, **{rule.slot: merged.value}), attrs, want, *ctx)
        if rule.wrap:
            res[rule.out] = SelectedRows(merged.rows, res[rule.out], merged.height,
                                         is_merged=True)
        return res
    run.dense = fn
    return run


def sparse_update(dense, xp, ins, attrs, want, ctx=None, *, rows_only: bool,
                  state: tuple[tuple[str, str], ...] = (("Param", "ParamOut"),),
                  grad_slot: str = "Grad"):
    """The update `dense` makes from the SelectedRows gradient ins[grad_slot].

    rows_only=False: on the gradient as a dense table (zeros where no row was looked up): the
    dense optimizers (momentum, adam without lazy_mode, rmsprop) change every row, as fluid's.
    rows_only=True: the `state` arrays cut to the looked-up rows (each once, merged in the
    batch's rows), updated by `dense` on those rows, and written back in place into the
    arrays the plan lends (Param's own buffer for ParamOut, KernelContext.out), so a step
    costs its rows, not its table; where nothing is lent (a caller holds the table, inplace
    off) into copies of the whole arrays, with the same numbers."""
    g = ins[grad_slot]
    sub = dict(ins)
    if not rows_only:
        sub[grad_slot] = g.to_dense(xp)
        return dense(xp, sub, attrs, want) if ctx is None else dense(xp, sub, attrs, want, ctx)
    merged = g.merged(xp)
    rows = merged.rows
    for slot, _ in state:
        sub[slot] = ins[slot][rows]
    sub[grad_slot] = merged.value
    if ctx is None:
        res = dense(xp, sub, attrs, want)
    else:  # the plan's outputs are whole tables, not these rows: a context of its own
        res = dense(xp, sub, attrs, want, _rows_context(ctx))
    for slot, out_slot in state:
        if out_slot in res:
            whole = ins[slot]
            lent = ctx.out(xp, out_slot) if ctx is not None else None
            if lent is not whole:  # not ours to write: a copy, as a dense update would make
                whole = whole.copy()
            whole[rows] = res[out_slot]
            res[out_slot] = whole
    return res


def _rows_context(ctx):
    """A KernelContext for the update of the looked-up rows (no plan outputs, no loans),
    kept in the op's own context so its scratch lasts from step to step."""
    sub = ctx.scratch.get("rows context")
    if sub is None:
        from .context import KernelContext

        sub = ctx.scratch["rows context"] = KernelContext(rng=ctx.rng, place=ctx.place)
    return sub
