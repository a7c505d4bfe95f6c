"""FLAGS_check_nan_inf: every op's floating-point outputs and every feed checked for NaN and
Inf, the first offender named (op, variable, rank) before any parameter is written back.

Chosen when a plan is built (a wrapped kernel per step), so with the flag off the step loop is
exactly the unchecked one: the check costs nothing unless asked for. bench/check_nan_inf.py
measures what it costs when on.
"""
from __future__ import annotations

import numpy as np

from ..errors import FeedError, NumericError
from .stand_in import ShapeOnly


def _bad(xp, array) -> str | None:
    """'NaN', 'Inf' or 'NaN and Inf' when a float array holds them, else None."""
    dtype = getattr(array, "dtype", None)
    if dtype is None or np.dtype(dtype).kind not in "fc":
        return None
    if bool(xp.isfinite(array).all()):
        return None
    nan, inf = bool(xp.isnan(array).any()), bool(xp.isinf(array).any())
    return " and ".join(k for k, v in (("NaN", nan), ("Inf", inf)) if v)


def _count(xp, array) -> int:
    return int((~xp.isfinite(array)).sum())


def check_feeds(feed: dict, xp, tag: str) -> None:
    for name, value in feed.items():
        found = _bad(xp, value)
        if found:
            raise FeedError(
                f"{tag}FLAGS_check_nan_inf: feed '{name}' holds {found} ({_count(xp, value)} of "
                f"{value.size} values, shape {list(value.shape)}); clean the data or the reader")


def checking(fn, where, tag: str):
    """`fn` (a kernel), raising NumericError when an output holds NaN or Inf."""
    index, op = where

    def run(xp, ins, attrs, want):
        res = fn(xp, ins, attrs, want)
        for slot, value in res.items():
            arrays = value if isinstance(value, (list, tuple)) else [value]
            for k, array in enumerate(arrays):
                found = _bad(xp, array)
                if found:
                    names = op.output(slot)
                    name = names[k] if k < len(names) else f"{slot}[{k}]"
                    raise NumericError(
                        f"{tag}FLAGS_check_nan_inf: op #{index} '{op.type}' wrote {found} into "
                        f"'{name}' (output {slot}; {_count(xp, array)} of {array.size} values, "
                        f"shape {list(array.shape)}); its inputs: {_input_summary(xp, ins)}. "
                        f"No parameter was updated by this run")
        return res

    return run


def _input_summary(xp, ins: dict) -> str:
    parts = []
    for slot, value in ins.items():
        arrays = value if isinstance(value, (list, tuple)) else [value]
        for array in arrays:
            if type(array) is ShapeOnly:  # a no-need-buffer input: only its shape is kept
                parts.append(f"{slot} {list(array.shape)} (shape only)")
            elif hasattr(array, "dtype"):
                found = _bad(xp, array)
                parts.append(f"{slot} {list(array.shape)}" + (f" (holds {found})" if found
                                                                else ""))
    return ", ".join(parts) or "none"
