"""Kernel: seed (spmd/ops/seed.py): [seed] when the attribute is not 0, else a draw in
[1, 2**31 - 1) from the run's generator."""
from __future__ import annotations

import numpy as np

from .registry import kernel


@kernel("seed", context=True)
def seed(xp, ins, attrs, want, ctx):
    value = attrs["seed"] or int(ctx.rng.integers(1, 2 ** 31 - 1))
    return {"Out": xp.asarray(np.array([value], np.int32))}
