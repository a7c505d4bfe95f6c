"""A variable's shape as the IR holds it: a tuple of ints, -1 for a dim unknown until run time.

Below variable.py (which re-exports normalize_shape) and op_desc.py, which both set shapes.
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError

__all__ = ["normalize_shape"]


def normalize_shape(shape, name: str) -> tuple:
    """`shape` as a tuple of ints, None and negative dims becoming -1 (unknown)."""
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise InvalidArgumentError(
            f"variable '{name}': shape must be a list of ints (None or -1 for unknown), "
            f"got {shape!r}")
    dims = []
    for d in shape:
        if d is None:
            dims.append(-1)
        elif isinstance(d, numbers.Integral) and not isinstance(d, bool):
            dims.append(int(d) if d >= 0 else -1)
        else:
            raise InvalidArgumentError(
                f"variable '{name}': shape {list(shape)!r} has a dim {d!r} that is not an int")
    return tuple(dims)
