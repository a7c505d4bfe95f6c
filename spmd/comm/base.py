"""The one collective interface every backend implements, on contiguous arrays.

allreduce and reduce take a `reduction` from REDUCTIONS ("sum" unless said: gradients),
reduce_scatter always sums. Methods work in place on `array` where the backend can and return
the result array; callers use the return value.
"""
from __future__ import annotations

import abc

from ..errors import CommunicationError

# fluid's c_allreduce_{sum,max,min,prod}; every backend has all four (MPI, NCCL, numpy)
REDUCTIONS = ("sum", "max", "min", "prod")


def check_reduction(reduction: str) -> str:
    if reduction not in REDUCTIONS:
        raise CommunicationError(
            f"unknown reduction {reduction!r}; the collectives reduce with one of {REDUCTIONS}")
    return reduction


class Request(abc.ABC):
    """A collective in flight; `wait()` returns its result array."""

    @abc.abstractmethod
    def wait(self):
        ...


class DoneRequest(Request):
    def __init__(self, result):
        self._result = result

    def wait(self):
        return self._result


class Communicator(abc.ABC):
    """rank/size plus allreduce, reduce, broadcast, allgather, reduce_scatter, barrier."""

    rank: int = 0
    size: int = 1

    @abc.abstractmethod
    def allreduce(self, array, reduction: str = "sum"):
        """`reduction` over ranks, elementwise; every rank gets the result."""

    def iallreduce(self, array, reduction: str = "sum") -> Request:
        """Non-blocking allreduce; the default completes at once."""
        return DoneRequest(self.allreduce(array, reduction))

    @abc.abstractmethod
    def reduce(self, array, root: int, reduction: str = "sum"):
        """`reduction` over ranks into `root`'s array; other ranks' arrays are unspecified
        after."""

    @abc.abstractmethod
    def broadcast(self, array, root: int):
        """`root`'s array to every rank."""

    @abc.abstractmethod
    def allgather(self, array):
        """Concatenation over ranks along a new leading axis: shape (size,) + array.shape."""

    @abc.abstractmethod
    def reduce_scatter(self, array):
        """Sum over ranks of `array` (length divisible by size), each rank keeping its
        1/size slice (rank order)."""

    @abc.abstractmethod
    def barrier(self):
        ...

    def describe(self) -> str:
        return f"[rank {self.rank}/{self.size}]"

    def missing(self) -> str:
        """After a timeout: which ranks never reached this rank's latest collective, as a
        sentence, or '' where the backend cannot tell."""
        return ""

    def untimed(self, op: str):
        """The fastest blocking form of `op` ("allreduce", "reduce", "broadcast"), for a caller
        that runs it on a thread of its own and enforces the timeout itself while waiting."""
        return getattr(self, op)


class SelfCommunicator(Communicator):
    """A world of one: every collective is the identity. No MPI library needed."""

    def allreduce(self, array, reduction="sum"):
        check_reduction(reduction)
        return array

    def reduce(self, array, root, reduction="sum"):
        check_reduction(reduction)
        return array

    def broadcast(self, array, root):
        return array

    def allgather(self, array):
        return array.reshape((1,) + array.shape).copy()

    def reduce_scatter(self, array):
        return array

    def barrier(self):
        pass
