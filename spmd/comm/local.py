"""Several places in one process: one thread per place, collectives through shared memory.

`LocalGroup(n)` is the shared rendezvous; `group.communicator(i)` is place i's view, with a
watchdog of its own (its timeout the group's, unless changed) that each exchange registers with
and takes its timeout from (a threading.Barrier times out by itself). Reductions
are taken in place order by one thread, so every place gets bitwise the same result.
`HierarchicalCommunicator` stacks a local group under an MPI communicator: reduce locally, cross
processes once, share the result locally.
"""
from __future__ import annotations

import threading

import numpy as np

from ..errors import CommunicationError
from .base import (
    Communicator,
    check_divisible,
    check_reduction,
    gathered_into,
    register_backend,
)
from .watchdog import Watchdog


class LocalGroup:
    def __init__(self, size: int, timeout_s: float | None = None):
        if timeout_s is None:
            from ..flags import flags

            timeout_s = flags().collective_timeout_s
        self.size = size
        self.timeout_s = timeout_s
        self._barrier = threading.Barrier(size)
        self._slots: list = [None] * size
        self._result = None

    def communicator(self, index: int) -> LocalCommunicator:
        return LocalCommunicator(self, index)

    def _sync(self, op: str, index: int, timeout: float):
        try:
            self._barrier.wait(timeout)
        except threading.BrokenBarrierError:
            raise CommunicationError(
                f"[place {index}/{self.size}] {op}: another place of this process failed or "
                f"did not arrive within {timeout:g} s") from None

    def abort(self):
        """Wake every waiting place with an error (one place failed)."""
        self._barrier.abort()

    def reset(self):
        self._barrier.reset()

    def exchange(self, member: LocalCommunicator, value, combine, op: str):
        """Every place contributes `value`; place 0 computes combine(all values) once; every
        place gets that result. `member`: the place's communicator, whose watchdog watches the
        wait and says how long it may last."""
        index = member.rank
        with member.watchdog.bounded(op, member) as wait:
            self._slots[index] = value
            self._sync(op, index, wait.timeout)
            if index == 0:
                try:
                    self._result = combine(self._slots)
                except BaseException:
                    self._barrier.abort()  # the others must not read a stale result
                    raise
            self._sync(op, index, wait.timeout)
            result = self._result
            # nobody starts the next exchange while others still read
            self._sync(op, index, wait.timeout)
        return result


_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def _in_order(reduction: str):
    """The function reducing every place's array, first to last, with `reduction`."""
    ufunc = _UFUNCS[check_reduction(reduction)]

    def combine(arrays):
        total = arrays[0].copy()
        for a in arrays[1:]:
            ufunc(total, a, out=total)
        return total

    return combine


_sum_in_order = _in_order("sum")


@register_backend("local")
class LocalCommunicator(Communicator):
    def __init__(self, group: LocalGroup, index: int):
        self.group, self.rank, self.size = group, index, group.size

    def make_watchdog(self):
        return Watchdog(self, self.group.timeout_s)

    def processes(self) -> int:
        return 1  # every member is a thread of this process

    def allreduce(self, array, reduction="sum"):
        total = self.group.exchange(self, array, _in_order(reduction), "allreduce")
        array[...] = total
        return array

    def reduce(self, array, root: int, reduction="sum"):
        total = self.group.exchange(self, array, _in_order(reduction),
                                    f"reduce(root={root})")
        if self.rank == root:
            array[...] = total
        return array

    def broadcast(self, array, root: int):
        src = self.group.exchange(self, array, lambda a: a[root].copy(),
                                  f"broadcast(root={root})")
        array[...] = src
        return array

    def allgather(self, array, out=None):
        return gathered_into(out, self.group.exchange(self, array, np.stack, "allgather"))

    def reduce_scatter(self, array):
        check_divisible(self, array)  # as MPI does: a remainder would be dropped silently
        total = self.group.exchange(self, array, _sum_in_order, "reduce_scatter")
        n = total.size // self.size
        return total.reshape(-1)[self.rank * n:(self.rank + 1) * n].copy()

    def barrier(self):
        self.group.exchange(self, None, lambda a: None, "barrier")


@register_backend("hierarchical")
class HierarchicalCommunicator(Communicator):
    """Place `index` of `local.size` places in this process, over `outer` (one member per
    process). Global rank = outer.rank * local.size + index."""

    def __init__(self, local: LocalCommunicator, outer: Communicator):
        self.local, self.outer = local, outer
        self.size = local.size * outer.size
        self.rank = outer.rank * local.size + local.rank

    def processes(self) -> int:
        return self.outer.processes()

    def missing(self) -> str:
        found = self.outer.missing()
        return f"counting processes (MPI ranks), {found}" if found else ""

    def _across(self, array, fn, op):
        """Local place 0 runs the cross-process part `fn(all places' arrays)`; the others wait
        for its result."""
        return self.local.group.exchange(self.local, array, fn, op)

    def allreduce(self, array, reduction="sum"):
        combine = _in_order(reduction)
        total = self._across(array, lambda a: self.outer.allreduce(combine(a), reduction),
                             "allreduce")
        array[...] = total
        return array

    def reduce(self, array, root: int, reduction="sum"):
        proc, place = divmod(root, self.local.size)
        combine = _in_order(reduction)
        total = self._across(array, lambda a: self.outer.reduce(combine(a), proc, reduction),
                             f"reduce(root={root})")
        if self.rank == root:
            array[...] = total
        return array

    def broadcast(self, array, root: int):
        proc, place = divmod(root, self.local.size)
        src = self._across(array, lambda a: self.outer.broadcast(a[place].copy(), proc),
                           f"broadcast(root={root})")
        array[...] = src
        return array

    def allgather(self, array, out=None):
        gathered = self._across(array, lambda a: self.outer.allgather(np.stack(a)), "allgather")
        return gathered_into(out, gathered.reshape((self.size,) + array.shape))

    def reduce_scatter(self, array):
        check_divisible(self, array)
        total = self._across(array, lambda a: self.outer.allreduce(_sum_in_order(a)),
                             "reduce_scatter")
        n = total.size // self.size
        return total.reshape(-1)[self.rank * n:(self.rank + 1) * n].copy()

    def barrier(self):
        self._across(None, lambda a: self.outer.barrier(), "barrier")
