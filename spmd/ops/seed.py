"""Op definition: seed, fluid 1.8's op that writes one int32 random seed (its `seed` attribute
when that is not 0, else a fresh draw); RecomputeOptimizer feeds it to dropout's Seed input so
that a recomputed dropout draws the forward pass's mask."""
from __future__ import annotations

from .registry import define_op


@define_op("seed", outputs=["Out"], grad=None, random=True, attrs={"seed": ("int", 0)})
def _seed(ctx):
    ctx.set_output("Out", (1,), "int32")
