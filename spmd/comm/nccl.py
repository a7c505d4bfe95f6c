"""Collectives on GPU arrays with NCCL (cupy.cuda.nccl), "nccl2 mode": rank 0 makes the unique
id, MPI broadcasts it as raw bytes, each process builds its communicator after selecting its
device. cupy is imported only here, only when a GPU place is used.
"""
from __future__ import annotations

import time

import numpy as np

from .. import guard
from ..errors import CommunicationError
from .base import Communicator, Request, check_reduction


def _nccl_dtype(nccl, dtype) -> int:
    table = {"float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32,
             "float64": nccl.NCCL_FLOAT64, "int32": nccl.NCCL_INT32, "int64": nccl.NCCL_INT64,
             "uint8": nccl.NCCL_UINT8, "int8": nccl.NCCL_INT8}
    name = np.dtype(dtype).name
    if name not in table:
        raise CommunicationError(f"NCCL cannot reduce dtype {name}; supported: {sorted(table)}")
    return table[name]


def make_unique_id(mpi_comm) -> tuple:
    """NCCL's unique id, made on rank 0 and broadcast over MPI (128 raw bytes, no pickle)."""
    from cupy.cuda import nccl

    raw = None
    if mpi_comm.rank == 0:
        raw = np.array(nccl.get_unique_id(), dtype=np.int8).tobytes()
    raw = mpi_comm.bcast_bytes(raw, root=0)
    return tuple(int(b) for b in np.frombuffer(raw, dtype=np.int8))


class _StreamRequest(Request):
    def __init__(self, comm: NCCLCommunicator, event, result, op):
        self._comm, self._event, self._result, self._op = comm, event, result, op

    def wait(self):
        self._comm._wait_event(self._event, self._op)
        return self._result


class NCCLCommunicator(Communicator):
    """One rank per GPU. Collectives run on the current cupy stream, so they are ordered with
    the kernels around them; `wait` polls an event and NCCL's async error state with a timeout."""

    def __init__(self, device_id: int, mpi_comm, timeout_s: float | None = None):
        import cupy
        from cupy.cuda import nccl

        if timeout_s is None:
            from ..flags import flags

            timeout_s = flags().collective_timeout_s
        self._cupy, self._nccl = cupy, nccl
        self.device_id = device_id
        cupy.cuda.Device(device_id).use()  # the communicator binds to the current device
        self.rank, self.size = mpi_comm.rank, mpi_comm.size
        self.timeout_s = timeout_s
        uid = make_unique_id(mpi_comm)
        try:
            self.comm = nccl.NcclCommunicator(self.size, uid, self.rank)
        except nccl.NcclError as e:
            raise CommunicationError(
                f"{self.describe()} NCCL communicator init on GPU {device_id} failed: {e}; "
                f"NCCL needs one process per GPU (two ranks cannot share a device)") from e

    def _stream(self):
        return self._cupy.cuda.get_current_stream().ptr

    def _wait_event(self, event, op):
        deadline = time.monotonic() + self.timeout_s
        while not event.done:
            self.comm.check_async_error()
            departed = guard.departure_message(f"NCCL {op}", self.describe())
            if departed:  # a peer left: this collective can never complete
                self.comm.abort()
                guard.let_the_reporter_speak()
                raise CommunicationError(departed)
            if time.monotonic() > deadline:
                self.comm.abort()
                raise CommunicationError(
                    f"{self.describe()} NCCL {op} did not complete within {self.timeout_s:g} s; "
                    f"another rank never reached it")
            time.sleep(0.0001)
        self.comm.check_async_error()

    def _record(self, result, op):
        guard.note_collective()  # issued just before: counted once it is on the stream
        event = self._cupy.cuda.Event(disable_timing=True)
        event.record()
        return _StreamRequest(self, event, result, op)

    def _op(self, reduction: str) -> int:
        # NCCL_SUM, NCCL_MAX, NCCL_MIN, NCCL_PROD
        return getattr(self._nccl, "NCCL_" + check_reduction(reduction).upper())

    def iallreduce(self, array, reduction: str = "sum") -> Request:
        self.comm.allReduce(array.data.ptr, array.data.ptr, array.size,
                            _nccl_dtype(self._nccl, array.dtype), self._op(reduction),
                            self._stream())
        return self._record(array, "allreduce")

    def allreduce(self, array, reduction: str = "sum"):
        return self.iallreduce(array, reduction).wait()

    def reduce(self, array, root: int, reduction: str = "sum"):
        self.comm.reduce(array.data.ptr, array.data.ptr, array.size,
                         _nccl_dtype(self._nccl, array.dtype), self._op(reduction), root,
                         self._stream())
        return self._record(array, f"reduce(root={root})").wait()

    def broadcast(self, array, root: int):
        self.comm.bcast(array.data.ptr, array.size, _nccl_dtype(self._nccl, array.dtype), root,
                        self._stream())
        return self._record(array, f"broadcast(root={root})").wait()

    def allgather(self, array):
        out = self._cupy.empty((self.size,) + array.shape, dtype=array.dtype)
        self.comm.allGather(array.data.ptr, out.data.ptr, array.size,
                            _nccl_dtype(self._nccl, array.dtype), self._stream())
        return self._record(out, "allgather").wait()

    def reduce_scatter(self, array):
        if array.size % self.size:
            raise CommunicationError(
                f"{self.describe()} reduce_scatter of {array.size} elements over {self.size} "
                f"ranks: the size must be divisible by the number of ranks")
        out = self._cupy.empty(array.size // self.size, dtype=array.dtype)
        self.comm.reduceScatter(array.data.ptr, out.data.ptr, out.size,
                                _nccl_dtype(self._nccl, array.dtype), self._nccl.NCCL_SUM,
                                self._stream())
        return self._record(out, "reduce_scatter").wait()

    def barrier(self):
        token = self._cupy.zeros(1, dtype=self._cupy.float32)
        self.allreduce(token)
