"""Kernel table: op type -> one function written against `xp` (numpy or cupy).

Every kernel has the signature `kernel(xp, ins, attrs, want) -> dict`:
- `ins`: input slot -> array (a list of arrays for duplicable slots); optional slots that are not
  bound are absent, so use `ins.get("Bias")`.
- `attrs`: the op's validated attributes, a read-only mapping;
- `want`: frozenset of the output slots the op binds; grad kernels skip work for the others.
It returns output slot -> array (list for duplicable slots). Kernels never modify their inputs.
A kernel registered with `context=True` also gets a fifth argument, its `KernelContext`
(context.py): random draws, the communicator, preallocated outputs and scratch buffers. One
registered with `inplace=(slots)` may be offered, for those output slots, the buffer of its
input of the same variable (KernelContext.out): the plan decides when (executor/inplace.py),
and the kernel reads each element before it writes it.

The kernel modules are imported when a kernel they register is first looked up (KERNELS is a
spmd.lazy.LazyTable over the generated kernel_index.py; spmd.lazy.write_indexes() rewrites it).
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import NotFoundError
from ..lazy import LazyTable, defining_module, read_index

KERNELS: LazyTable = LazyTable("kernel for op", lambda: read_index("spmd.kernels.kernel_index"),
                               "spmd.kernels")
TAKES_CONTEXT: set[str] = set()  # op types whose kernel is called with a KernelContext
INPLACE: dict[str, frozenset] = {}  # op type -> output slots it may write over its input


def kernel(*types: str, context: bool = False, sparse=None, inplace: tuple = ()):
    """Register the decorated function as the kernel of each op type in `types`; with
    `context=True` it is called with the op's KernelContext as a fifth argument. An optimizer
    kernel takes sparse (SelectedRows) gradients by `sparse`, a SparseRule
    (spmd/kernels/sparse_update.py). `inplace`: the output slots (with `context=True`) whose
    offered buffer may be the array of its input of the same variable (see the module doc)."""

    origin = defining_module()

    def register(fn):
        if sparse is not None:
            from .sparse_update import taking_sparse

            fn = taking_sparse(fn, sparse)
        for t in types:
            KERNELS.register(t, fn, origin)
            if context:
                TAKES_CONTEXT.add(t)
                if inplace:
                    INPLACE[t] = frozenset(inplace)
        return fn

    return register


def get_kernel(type: str) -> Callable:
    try:
        return KERNELS[type]
    except KeyError:
        raise NotFoundError(
            f"no kernel for op '{type}': the op is defined but has no kernel in spmd/kernels "
            f"({len(KERNELS)} kernels exist)"  # len() loads them all
        ) from None


def takes_context(type: str) -> bool:
    """Whether op `type`'s kernel is called with a KernelContext."""
    if not KERNELS.registered(type):
        KERNELS.get(type)  # import the module that registers it
    return type in TAKES_CONTEXT


def inplace_slots(type: str) -> frozenset:
    """The output slots op `type`'s kernel may write over its input of the same variable."""
    if not KERNELS.registered(type):
        KERNELS.get(type)
    return INPLACE.get(type, frozenset())


def run_kernel(type: str, xp, ins: dict, attrs: dict, want, ctx=None) -> dict:
    """Call op `type`'s kernel once, outside a plan (tests, tools); a kernel that takes a
    KernelContext gets `ctx`, or a fresh one (no communicator, numpy's default generator).

    >>> import numpy as np
    >>> run_kernel("scale", np, {"X": np.ones(2)},
    ...            {"scale": 2.0, "bias": 0.0, "bias_after_scale": True}, {"Out"})["Out"]
    array([2., 2.])
    """
    fn = get_kernel(type)
    if not takes_context(type):
        return fn(xp, ins, attrs, want)
    if ctx is None:
        import numpy as np

        from .context import KernelContext

        ctx = KernelContext(rng=np.random.default_rng())
    return fn(xp, ins, attrs, want, ctx)
