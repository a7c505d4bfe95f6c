"""GPU arrays over MPI, staged through host memory: for ranks that share one GPU, where NCCL
refuses to run (it needs one rank per device). Each collective copies to the host, runs the
MPI collective, and copies back; host arrays pass straight through."""
from __future__ import annotations

import numpy as np

from .base import Communicator, gathered_into, register_backend


def _to_host(array):
    return array if isinstance(array, np.ndarray) else array.get()


def _back(device_array, host):
    if device_array is not host:
        device_array.set(host)
    return device_array


@register_backend("staged")
class HostStagedCommunicator(Communicator):
    def __init__(self, mpi):
        self.mpi = mpi
        self.rank, self.size = mpi.rank, mpi.size

    def make_engine(self):
        """Collectives run at once on the caller's thread: the host copies block it anyway,
        and a thread of their own would not be on this process's CUDA device."""
        from .progress import ImmediateEngine

        return ImmediateEngine(self)

    def allreduce(self, array, reduction="sum"):
        return _back(array, self.mpi.allreduce(_to_host(array), reduction))

    def reduce(self, array, root: int, reduction="sum"):
        return _back(array, self.mpi.reduce(_to_host(array), root, reduction))

    def broadcast(self, array, root: int):
        return _back(array, self.mpi.broadcast(_to_host(array), root))

    def allgather(self, array, out=None):
        gathered = _like(array, self.mpi.allgather(_to_host(array)))  # a new array already
        return gathered if out is None else gathered_into(out, gathered)

    def reduce_scatter(self, array):
        return _like(array, self.mpi.reduce_scatter(_to_host(array)))

    def barrier(self):
        self.mpi.barrier()

    def missing(self) -> str:
        return self.mpi.missing()

    def make_watchdog(self):
        """The MPI communicator's: every wait of this one is a wait of that one."""
        return self.mpi.watchdog


def _like(reference, host):
    if isinstance(reference, np.ndarray):
        return host
    import cupy

    return cupy.asarray(host)
