"""Allreduce over MPI with persistent collective requests (MPI 4's MPI_Allreduce_init), for
arrays reduced again and again: the fused gradient buckets, reduced every step.

A persistent request fixes the buffer, count, datatype and op once; each later allreduce of
the same array is Start + Wait, skipping MPI's per-call set-up. Measured with MPICH 5 on 2
ranks of this machine: 3.2 us against 5.3 us for 64 floats, 507 us against 518 us for 2.7 MB.
An array gets its request on its second allreduce (a buffer packed afresh for each call would
only pay the set-up), and only while it is the same live array: requests hold weak references,
so they never keep a buffer alive. Every other collective is MPICommunicator's.

>>> # comm = create_communicator("mpi_persistent")   # under mpiexec
"""
from __future__ import annotations

import atexit
import weakref
from collections import OrderedDict

from .base import register_backend
from .mpi import MPICommunicator, _check_contiguous


@register_backend("mpi_persistent")
class PersistentMPICommunicator(MPICommunicator):
    CACHED = 64  # requests kept, least recently used freed first

    def __init__(self, comm=None, timeout_s: float | None = None, track_arrivals=False):
        super().__init__(comm, timeout_s, track_arrivals)
        # (id(array), reduction) -> (weak reference to the array, its persistent request)
        self._requests: OrderedDict = OrderedDict()
        self._seen: dict = {}  # (id(array), reduction) -> weak reference: allreduced once
        # MPI finalizes at exit and complains about requests never freed: free them first
        # (atexit runs this before mpi4py's finalize, which was registered earlier)
        atexit.register(_free_all, self._requests)

    def _request(self, array, reduction: str):
        """The persistent request of this live array, made on its second allreduce; None
        while it is new (the plain call serves it)."""
        key = (id(array), reduction)
        entry = self._requests.get(key)
        if entry is not None:
            if entry[0]() is array:
                self._requests.move_to_end(key)
                return entry[1]
            del self._requests[key]  # the id of a freed array, reused
            entry[1].Free()
        seen = self._seen.get(key)
        if seen is None or seen() is not array:
            if len(self._seen) > 4 * self.CACHED:
                self._seen = {k: r for k, r in self._seen.items() if r() is not None}
            self._seen[key] = weakref.ref(array)
            return None
        del self._seen[key]
        request = self.comm.Allreduce_init(self._MPI.IN_PLACE, array, op=self._op(reduction))
        self._requests[key] = (weakref.ref(array), request)
        if len(self._requests) > self.CACHED:
            _, (_, oldest) = self._requests.popitem(last=False)
            oldest.Free()
        return request

    def allreduce(self, array, reduction: str = "sum"):
        _check_contiguous(array, "allreduce")
        request = self._request(array, reduction)
        if request is None:
            return super().allreduce(array, reduction)
        self._enter("allreduce")
        request.Start()
        try:
            self._wait(request, "allreduce", array)
        except Exception:
            # still active: it can neither start again nor be freed until a late rank joins
            self._requests.pop((id(array), reduction), None)
            raise
        return array

    def untimed(self, op: str):
        if op != "allreduce":
            return super().untimed(op)
        plain = super().untimed(op)

        def allreduce(array, reduction="sum"):
            _check_contiguous(array, "allreduce")
            request = self._request(array, reduction)
            if request is None:
                return plain(array, reduction)
            self._enter("allreduce")
            request.Start()
            request.Wait()
            return array

        return allreduce

    def close(self) -> None:
        super().close()
        _free_all(self._requests)


def _free_all(requests: OrderedDict) -> None:
    while requests:
        _, (_, request) = requests.popitem()
        try:
            request.Free()
        except Exception:  # noqa: BLE001 - MPI already finalized: nothing left to free
            pass
