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
and the kernel reads each element before it writes it. One registered with
`reuses=((out_slot, in_slot), ...)` may be lent, for an output, the buffer of an input that
dies at the op (an activation): it is then called with a keyword `lent` (slot -> array, for
that call only) and writes that output there when `lent_for` says the array fits; it must
still give the same numbers, and must not read an input after it began writing over it.
One registered with `context=True, pure=True` is a pure function of its inputs all the same
(its context offers only output buffers or scratch): the SSA executor may reorder it.
Each registration's facts are one `KernelDef` (`kernel_def(type)`).

The kernel modules are imported when a kernel they register is first looked up (KERNELS is a
spmd.lazy.LazyTable over the generated kernel_index.py; spmd.lazy.write_indexes() rewrites it).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import NotFoundError
from ..lazy import LazyTable, defining_module, read_index

KERNELS: LazyTable = LazyTable("kernel for op", lambda: read_index("spmd.kernels.kernel_index"),
                               "spmd.kernels")


class KernelDef:
    """What the plan and the executors know of one op type's kernel, declared by `kernel(...)`
    where the kernel is defined. A plain class, not a dataclass: making the frozen dataclass
    cost every rank's start-up about 1 ms (this module's own import time, `python -X
    importtime`: 1.25 -> 0.28 ms), and nothing compares or copies these records; they are never
    changed after registration."""

    __slots__ = ("type", "fn", "context", "inplace", "spends", "reuses", "pure")

    def __init__(self, type: str, fn: Callable, context: bool = False,
                 inplace: frozenset = frozenset(), spends: tuple = (), reuses: tuple = (),
                 pure: bool = False):
        self.type = type
        self.fn = fn
        self.context = context  # called with a KernelContext as a fifth argument
        self.inplace = inplace  # output slots it may write over its input's buffer
        self.spends = spends  # input slots it may write over when they die at the op
        self.reuses = reuses  # ((output slot, input slot it may reuse), ...), by preference
        self.pure = pure  # with a context, a pure function of its inputs all the same

    def __repr__(self) -> str:
        return (f"KernelDef({self.type!r}, context={self.context}, inplace={set(self.inplace)}, "
                f"spends={self.spends}, reuses={self.reuses}, pure={self.pure})")


# op type -> KernelDef, filled with KERNELS (whose lookups import the registering module)
KERNEL_DEFS: dict[str, KernelDef] = {}


def kernel(*types: str, context: bool = False, sparse=None, inplace: tuple = (),
           reuses: tuple = (), spends: tuple = (), pure: bool = False):
    """Register the decorated function as the kernel of each op type in `types`; with
    `context=True` it is called with the op's KernelContext as a fifth argument. An optimizer
    kernel takes sparse (SelectedRows) gradients by `sparse`, a SparseRule
    (spmd/kernels/sparse_update.py). `inplace`: the output slots (with `context=True`) whose
    offered buffer may be the array of its input of the same variable (see the module doc).
    `reuses`: ((output slot, input slot), ...), in order of preference: the outputs it may
    write into the buffer of an input that dies at the op, given as the keyword `lent`.
    `spends` (with `inplace`): input slots the kernel may use as scratch, written over, when
    the value dies at the op and nothing else holds it: KernelContext.spent(slot) gives it.
    `pure` (with `context`): the kernel's context offers it only output buffers or scratch,
    never shared state, so the SSA executor need not keep it in program order."""
    if reuses and sparse is not None:  # the sparse wrapper does not pass `lent` on
        raise ValueError(f"kernel {types}: reuses= and sparse= do not combine")

    origin = defining_module()

    def register(fn):
        if sparse is not None:
            from .sparse_update import taking_sparse

            fn = taking_sparse(fn, sparse)
        for t in types:
            KERNELS.register(t, fn, origin)
            KERNEL_DEFS[t] = KernelDef(
                t, fn, context, frozenset(inplace) if context else frozenset(),
                tuple(spends) if context and inplace else (), tuple(reuses), context and pure)
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


_NO_KERNEL = KernelDef("", None)  # the facts of an op without a kernel: none


def kernel_def(type: str) -> KernelDef:
    """The KernelDef of op `type` (importing the module that registers it); one with no
    facts set if the op has no kernel."""
    if not KERNELS.registered(type):
        KERNELS.get(type)  # import the module that registers it
    return KERNEL_DEFS.get(type, _NO_KERNEL)


def takes_context(type: str) -> bool:
    """Whether op `type`'s kernel is called with a KernelContext."""
    return kernel_def(type).context


def inplace_slots(type: str) -> frozenset:
    """The output slots op `type`'s kernel may write over its input of the same variable."""
    return kernel_def(type).inplace


def spend_slots(type: str) -> tuple:
    """The input slots op `type`'s kernel may write over when their value dies at the op."""
    return kernel_def(type).spends


def reuse_pairs(type: str) -> tuple:
    """((output slot, input slot), ...): the outputs op `type`'s kernel may write into the
    buffer of an input that dies at the op, in order of preference."""
    return kernel_def(type).reuses


def lent_for(lent: dict | None, slot: str, *operands):
    """The array lent for output `slot` (see the module doc) when an elementwise numpy result
    of `operands` (arrays, numpy scalars, Python numbers) has exactly its shape and dtype, else
    None: a kernel passes it as `out=`, None giving a fresh array. Checked at run time, so a
    broadcast that widens the output or a promoted dtype never writes there. Conservative and
    cheap (it runs on every loan): array operands of the buffer's dtype (bool ones too, which
    promote to it), broadcasting into its shape, one of them of that very shape; Python
    numbers only with a float buffer (they keep its dtype).

    >>> a = np.zeros(3, dtype="float32")
    >>> lent_for({"Out": a}, "Out", a, 1.0) is a, lent_for({"Out": a}, "Out", a, np.ones(3))
    (True, None)
    """
    if lent is None:
        return None
    array = lent.get(slot)
    if array is None:
        return None
    dtype, shape = array.dtype, array.shape
    whole = False
    for o in operands:
        if isinstance(o, (np.ndarray, np.generic)):
            if o.dtype != dtype and not (o.dtype.kind == "b" and dtype.kind in "iuf"):
                return None
            if o.shape == shape:
                whole = True
            elif not _broadcasts_into(o.shape, shape):
                return None
        elif not (type(o) in (int, float) and dtype.kind == "f"):
            return None
    return array if whole else None


def _broadcasts_into(small: tuple, big: tuple) -> bool:
    if len(small) > len(big):
        return False
    for s, b in zip(reversed(small), reversed(big)):  # (a loop: no generator's calls)
        if s != 1 and s != b:
            return False
    return True


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
