"""Kernels: how control-flow kernels run a sub-block and handle its values; the kernels
themselves are in loops.py (while, recurrent), branches.py (conditional_block, select_input /
select_output, is_empty, IfElse's split and merge) and tensor_array.py.

A block runs through `ctx.run_block(index, env, xp)` on an env (name -> value) the kernel
builds from its inputs (`block_env`): the block's temporaries are freed as it goes, so a loop
holds one iteration's values at a time. A gradient block recomputes what the forward block
computed, with the random generator as it was then (`RngReplay`), and then differentiates it;
gradients are added and made up with `add_values` / `zeros_like_value`, where None is zero and
a tensor array's gradient is a list.
"""
from __future__ import annotations

from ..core.lod import lod_key
from ..errors import InvalidArgumentError
from .tensor import ints_of


def block_env(*sources) -> dict:
    """A fresh env for one run of a block: `sources` (mappings, later ones winning)."""
    env: dict = {}
    for s in sources:
        env.update(s)
    return env


def lod_entries(names, lods) -> dict:
    """The LoD of each of `names` under its key, as a block's ops read it (None: none)."""
    return {lod_key(n): lod for n, lod in zip(names, lods or ())}


def scalar_int(a, what: str) -> int:
    """The one element of `a` (a condition, a mask, an index) as an int."""
    if isinstance(a, list) or a is None:
        raise InvalidArgumentError(f"{what} must be a one-element tensor, got {type(a).__name__}")
    if a.size != 1:
        raise InvalidArgumentError(
            f"{what} must hold exactly one element, got shape {list(a.shape)}; reduce it (e.g. "
            f"fluid.layers.reduce_all) before using it as a condition")
    return ints_of(a)[0]


def rng_state(ctx):
    """The random generator's state now, to replay it (None: the op draws nothing)."""
    rng = ctx.rng
    return None if rng is None else rng.bit_generator.state


class RngReplay:
    """Within the block: the generator as it was when the forward iteration began, so a
    recomputation draws the same numbers (dropout masks); afterwards, as it was."""

    def __init__(self, ctx, state):
        self.rng, self.state = ctx.rng, state

    def __enter__(self):
        if self.rng is not None and self.state is not None:
            self.saved = self.rng.bit_generator.state
            self.rng.bit_generator.state = self.state

    def __exit__(self, *exc):
        if self.rng is not None and self.state is not None:
            self.rng.bit_generator.state = self.saved
        return False


def zeros_like_value(xp, v):
    """A zero gradient for value `v`: zeros for a tensor, an array of no gradients (None) for a
    tensor array."""
    if v is None:
        return None
    if isinstance(v, list):
        return [None] * len(v)
    return xp.zeros_like(v)


def add_values(a, b):
    """a + b for gradients where None is zero; tensor arrays element by element."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, list) or isinstance(b, list):
        n = max(len(a), len(b))
        a, b = list(a) + [None] * (n - len(a)), list(b) + [None] * (n - len(b))
        return [add_values(x, y) for x, y in zip(a, b)]
    return a + b


def materialize(xp, g, like):
    """Gradient `g`, or zeros like `like` where there is none (None)."""
    return zeros_like_value(xp, like) if g is None else g
