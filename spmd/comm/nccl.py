"""Collectives on GPU arrays with NCCL (cupy.cuda.nccl), "nccl2 mode": rank 0 makes the unique
id, MPI broadcasts it as raw bytes, each process builds its communicator after selecting its
device. cupy is imported only here, only when a GPU place is used.
"""
from __future__ import annotations

import numpy as np

from .. import events
from ..errors import CommunicationError
from .base import Communicator, check_reduction, register_backend
from .handles import Handle
from .watchdog import ASYNC, BLOCKING, Watchdog


def _nccl_dtype(nccl, dtype) -> int:
    table = {"float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32,
             "float64": nccl.NCCL_FLOAT64, "int32": nccl.NCCL_INT32, "int64": nccl.NCCL_INT64,
             "uint8": nccl.NCCL_UINT8, "int8": nccl.NCCL_INT8}
    name = np.dtype(dtype).name
    if name not in table:
        raise CommunicationError(f"NCCL cannot reduce dtype {name}; supported: {sorted(table)}")
    return table[name]


def make_unique_id(mpi_comm):
    """NCCL's unique id, made on rank 0 and broadcast over MPI (128 raw bytes, no pickle), in
    the form this cupy's NcclCommunicator takes."""
    import cupy
    from cupy.cuda import nccl

    raw = unique_id_bytes(nccl.get_unique_id()) if mpi_comm.rank == 0 else None
    raw = mpi_comm.bcast_bytes(raw, root=0)
    return unique_id_for_cupy(raw, cupy.__version__)


def unique_id_bytes(uid) -> bytes:
    """The raw bytes of an id from nccl.get_unique_id(): bytes from cupy 14 on, a tuple of
    signed chars before (cupy's changelog: "Previously this returned a tuple of integers")."""
    if isinstance(uid, (bytes, bytearray)):
        return bytes(uid)
    return np.array(uid, dtype=np.int8).tobytes()


def unique_id_for_cupy(raw: bytes, cupy_version: str):
    """`raw` as NcclCommunicator's commId: bytes from cupy 14 on, the tuple of ints before."""
    major = cupy_version.split(".", 1)[0]
    if major.isdigit() and int(major) >= 14:
        return bytes(raw)
    return tuple(int(b) for b in np.frombuffer(raw, dtype=np.int8))


class _StreamHandle(Handle):
    def __init__(self, engine: StreamEngine, done, result, op: str):
        self._engine, self._done, self.out, self.op = engine, done, result, op

    def wait(self):
        """The compute stream waits for the collective (no host block): kernels issued after
        this read its result."""
        self._engine.cupy.cuda.get_current_stream().wait_event(self._done)
        return self.out

    def test(self) -> bool:
        return self._done.done


class StreamEngine:
    """NCCL collectives on a CUDA stream of their own. Each waits for the compute stream's
    work issued before it (an event), so the kernels issued after it overlap it; a handle's
    `wait()` orders the compute stream after it without blocking the host, and `wait_all()`
    polls the events on the host under the communicator's watchdog (past the timeout NCCL's
    own abort ends a collective that never completes)."""

    def __init__(self, comm: NCCLCommunicator):
        self.cupy = comm._cupy
        self._comm = comm
        with self.cupy.cuda.Device(comm.device_id):
            self._stream = self.cupy.cuda.Stream(non_blocking=True)
        self._pending: list[_StreamHandle] = []

    def issue(self, op: str, args: tuple, overlap: bool, label: str | None = None,
              into=None, lands_in=None) -> Handle:
        cuda = self.cupy.cuda
        ready = cuda.Event(disable_timing=True)
        ready.record(cuda.get_current_stream())
        self._stream.wait_event(ready)
        with self._stream:
            result = self._comm.launch(op, *args)
            if into is not None:
                into[...] = result
                result = into
        events.supervision.note_collective()
        done = cuda.Event(disable_timing=True)
        done.record(self._stream)
        handle = _StreamHandle(self, done, result, label or op)
        self._pending.append(handle)
        if not overlap:
            handle.wait()
        return handle

    def wait_all(self) -> None:
        pending, self._pending = self._pending, []
        for handle in pending:
            self._comm._wait_event(handle._done, handle.op, ASYNC)
            handle.wait()

    def close(self) -> None:
        self._pending = []


@register_backend("nccl")
class NCCLCommunicator(Communicator):
    """One rank per GPU. The blocking collectives run on the current cupy stream, ordered with
    the kernels around them, and poll an event and NCCL's async error state under the
    watchdog; the async ones run on a stream of their own (StreamEngine)."""

    def __init__(self, device_id: int, mpi_comm, timeout_s: float | None = None):
        import cupy
        from cupy.cuda import nccl

        self._cupy, self._nccl = cupy, nccl
        self.device_id = device_id
        cupy.cuda.Device(device_id).use()  # the communicator binds to the current device
        self.rank, self.size = mpi_comm.rank, mpi_comm.size
        self._watchdog = Watchdog(self, timeout_s)  # None: SPMD_COLLECTIVE_TIMEOUT
        uid = make_unique_id(mpi_comm)
        try:
            self.comm = nccl.NcclCommunicator(self.size, uid, self.rank)
        except nccl.NcclError as e:
            raise CommunicationError(
                f"{self.describe()} NCCL communicator init on GPU {device_id} failed: {e}; "
                f"NCCL needs one process per GPU (two ranks cannot share a device)") from e

    def make_engine(self):
        return StreamEngine(self)

    def _stream(self):
        return self._cupy.cuda.get_current_stream().ptr

    def _wait_event(self, event, op, form=BLOCKING):
        """Until `event` (the collective's end on its stream) is done, under the watchdog,
        raising NCCL's async errors. Past the timeout, or when a peer left before joining it,
        the communicator is aborted (the collective can never complete) and CommunicationError
        names the op and the Executor.run."""
        def done():
            self.comm.check_async_error()
            return event.done

        self.watchdog.poll(f"NCCL {op}", done, self, names_step=True, give_up=self.comm.abort,
                           form=form)
        self.comm.check_async_error()

    def _blocking(self, op: str, label: str, *args):
        result = self.launch(op, *args)
        events.supervision.note_collective()  # issued just before: counted once it is on the stream
        event = self._cupy.cuda.Event(disable_timing=True)
        event.record()
        self._wait_event(event, label)
        return result

    def _op(self, reduction: str) -> int:
        # NCCL_SUM, NCCL_MAX, NCCL_MIN, NCCL_PROD
        return getattr(self._nccl, "NCCL_" + check_reduction(reduction).upper())

    def launch(self, op: str, array=None, *args):
        """Enqueue collective `op` on the current stream; returns its result array (complete
        once the stream reaches it)."""
        nccl, stream = self._nccl, self._stream()
        if op == "barrier":
            array = self._cupy.zeros(1, dtype=self._cupy.float32)
            op, args = "allreduce", ("sum",)
        dtype = _nccl_dtype(nccl, array.dtype)
        if op == "allreduce":
            self.comm.allReduce(array.data.ptr, array.data.ptr, array.size, dtype,
                                self._op(args[0]), stream)
            return array
        if op == "reduce":
            root, reduction = args
            self.comm.reduce(array.data.ptr, array.data.ptr, array.size, dtype,
                             self._op(reduction), root, stream)
            return array
        if op == "broadcast":
            self.comm.bcast(array.data.ptr, array.size, dtype, args[0], stream)
            return array
        if op == "allgather":  # in place when `array` is out[rank] (NCCL allows it)
            out = args[0] if args and args[0] is not None else self._cupy.empty(
                (self.size,) + array.shape, dtype=array.dtype)
            self.comm.allGather(array.data.ptr, out.data.ptr, array.size, dtype, stream)
            return out
        if op == "reduce_scatter":
            if array.size % self.size:
                raise CommunicationError(
                    f"{self.describe()} reduce_scatter of {array.size} elements over "
                    f"{self.size} ranks: the size must be divisible by the number of ranks")
            out = self._cupy.empty(array.size // self.size, dtype=array.dtype)
            self.comm.reduceScatter(array.data.ptr, out.data.ptr, out.size, dtype,
                                    nccl.NCCL_SUM, stream)
            return out
        raise CommunicationError(f"unknown collective {op!r}")

    def allreduce(self, array, reduction: str = "sum"):
        return self._blocking("allreduce", "allreduce", array, reduction)

    def reduce(self, array, root: int, reduction: str = "sum"):
        return self._blocking("reduce", f"reduce(root={root})", array, root, reduction)

    def broadcast(self, array, root: int):
        return self._blocking("broadcast", f"broadcast(root={root})", array, root)

    def allgather(self, array, out=None):
        return self._blocking("allgather", "allgather", array, out)

    def reduce_scatter(self, array):
        return self._blocking("reduce_scatter", "reduce_scatter", array)

    def barrier(self):
        self._blocking("barrier", "barrier")
