"""Feed checking: every fed array matches its variable's shape and dtype before any op runs."""
from __future__ import annotations

import difflib

import numpy as np

from ..errors import FeedError


def check_feed_names(block, feed: dict, needed: list[str]):
    """Unknown names and missing data feeds, each named, with what would fix it."""
    for name in feed:
        if not block.has_var(name):
            close = difflib.get_close_matches(name, block.vars, n=3)
            raise FeedError(
                f"feed '{name}' is not a variable of the program"
                + (f"; did you mean {close}?" if close else "")
                + f" (data variables: {sorted(v.name for v in block.vars.values() if v.is_data)})"
            )
    missing = [n for n in needed if n not in feed]
    if missing:
        raise FeedError(
            f"variable(s) {missing} must be fed: the program reads them before any op writes "
            f"them; add them to feed= (fed: {sorted(feed)})"
        )


def convert_feed(var, value, xp):
    """Return `value` as a contiguous array of `var`'s dtype and shape, or raise FeedError."""
    if hasattr(value, "__array__") and not isinstance(value, np.ndarray) and xp is np:
        value = np.asarray(value)
    if not hasattr(value, "dtype"):  # python scalars and lists: take the variable's dtype
        try:
            value = np.asarray(value, dtype=var.dtype)
        except (TypeError, ValueError) as e:
            raise FeedError(
                f"feed '{var.name}': cannot convert to {var.dtype} array: {e}") from None
    if np.dtype(value.dtype).name != var.dtype:
        raise FeedError(
            f"feed '{var.name}': expected dtype {var.dtype}, got {np.dtype(value.dtype).name}; "
            f"convert it with .astype('{var.dtype}')"
        )
    expected = var.shape
    got = tuple(value.shape)
    if var.shape and (len(got) != len(expected) or any(
            e >= 0 and e != g for e, g in zip(expected, got))):
        shown = "[" + ", ".join("None" if d < 0 else str(d) for d in expected) + "]"
        raise FeedError(
            f"feed '{var.name}': expected shape {shown} (None = any size), got {list(got)}"
        )
    return xp.ascontiguousarray(value)
