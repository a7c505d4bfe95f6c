"""Kernel table: op type -> one function written against `xp` (numpy or cupy).

Every kernel has the signature `kernel(xp, ins, attrs, want) -> dict`:
- `ins`: input slot -> array (a list of arrays for duplicable slots); optional slots that are not
  bound are absent, so use `ins.get("Bias")`.
- `attrs`: the op's validated attributes (random ops also get `attrs["_rng"]`, a numpy Generator).
- `want`: frozenset of the output slots the op binds; grad kernels skip work for the others.
It returns output slot -> array (list for duplicable slots). Kernels never modify their inputs.
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import NotFoundError

KERNELS: dict[str, Callable] = {}


def out_buffer(xp, attrs, slot: str):
    """The preallocated array the plan wants output `slot` written into, or None.

    The plan offers one for a gradient that a fused collective will reduce: writing it in place
    saves packing it into the bucket (spmd/executor/buckets.py). A kernel that uses it returns
    that very array as the output."""
    target = attrs.get("_out")
    if target is None or slot not in target:
        return None
    return target[slot](xp)


def kernel(*types: str):
    """Register the decorated function as the kernel of each op type in `types`."""

    def register(fn):
        for t in types:
            if t in KERNELS:
                raise ValueError(f"kernel for op '{t}' is registered twice")
            KERNELS[t] = fn
        return fn

    return register


def get_kernel(type: str) -> Callable:
    try:
        return KERNELS[type]
    except KeyError:
        raise NotFoundError(
            f"no kernel for op '{type}': the op is defined but has no kernel in spmd/kernels "
            f"({len(KERNELS)} kernels exist)"
        ) from None
