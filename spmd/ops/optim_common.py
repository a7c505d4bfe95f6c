"""Shape checks shared by the update-op definitions (spmd/ops/optim*.py)."""
from __future__ import annotations

import math


def numel(shape) -> int:
    """Element count, or -1 when a dim is unknown."""
    return -1 if any(d < 0 for d in shape) else math.prod(shape)


def check_same_shape(ctx, slot: str, ref: str = "Param"):
    a, b = ctx.input(ref), ctx.input(slot)
    ctx.check(tuple(a.shape) == tuple(b.shape),
              f"{slot} {b.name}{list(b.shape)} must have the shape of {ref} "
              f"{a.name}{list(a.shape)}")


def check_scalar(ctx, slot: str):
    """Learning rates, beta powers and step counters hold one value (fluid: shape [1])."""
    v = ctx.input(slot)
    if v is None:
        return
    n = numel(v.shape)
    ctx.check(n in (1, -1), f"{slot} {v.name} must hold one element, got shape {list(v.shape)}")
