"""How an optimizer kernel takes a sparse (SelectedRows) gradient, declared where the kernel
is registered: `@kernel("sgd", sparse=SparseRule(rows_only=True))`.

fluid 1.8's rules: SGD, lazy Adam and FTRL change only the rows looked up; Momentum, Adam
without lazy_mode and Adagrad update every row (rows not looked up with a zero gradient), so
their result is the dense one. Both are done here through the kernel's own dense update: on
the dense gradient, or on the looked-up rows of the parameter and its accumulators.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.selected_rows import SelectedRows


@dataclass(frozen=True)
class SparseRule:
    """rows_only: True, False, or a function of the op's attributes (adam's lazy_mode);
    state: (input slot, output slot) of the arrays with one row per parameter row."""

    rows_only: bool | Callable = False
    state: tuple[tuple[str, str], ...] = (("Param", "ParamOut"),)
    grad_slot: str = "Grad"


@dataclass(frozen=True)
class SparseValues:
    """For ops gradient clipping applies to a gradient (clip, clip_by_norm, the global norm's
    squared_l2_norm and elementwise_mul by its scale): a SelectedRows input `slot` is merged
    (each row once, so norms and clips see the dense table's rows) and the kernel runs on its
    values; with `wrap`, output `out` is those rows with the kernel's values."""

    slot: str = "X"
    out: str = "Out"
    wrap: bool = True


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
            res[rule.out] = SelectedRows(merged.rows, res[rule.out], merged.height)
        return res
    run.dense = fn
    return run


def sparse_update(dense, xp, ins, attrs, want, ctx=None, *, rows_only: bool,
                  state: tuple[tuple[str, str], ...] = (("Param", "ParamOut"),),
                  grad_slot: str = "Grad"):
    """The update `dense` makes from the SelectedRows gradient ins[grad_slot].

    rows_only=False: on the gradient as a dense table (zeros where no row was looked up).
    rows_only=True: the `state` arrays cut to the looked-up rows, updated by `dense` with the
    merged gradient (each row once), and written back into copies of the whole arrays."""
    g = ins[grad_slot]
    sub = dict(ins)
    if not rows_only:
        sub[grad_slot] = g.to_dense(xp)
        return dense(xp, sub, attrs, want) if ctx is None else dense(xp, sub, attrs, want, ctx)
    merged = g.merged(xp)
    for slot, _ in state:
        sub[slot] = ins[slot][merged.rows]
    sub[grad_slot] = merged.value
    if ctx is None:
        res = dense(xp, sub, attrs, want)
    else:  # the dense kernel's preallocated outputs are whole tables: not for these rows
        from .context import KernelContext

        res = dense(xp, sub, attrs, want, KernelContext(rng=ctx.rng, place=ctx.place))
    for slot, out_slot in state:
        if out_slot in res:
            whole = ins[slot].copy()
            whole[merged.rows] = res[out_slot]
            res[out_slot] = whole
    return res
