"""The one collective contract every backend implements, on contiguous arrays.

Blocking forms: allreduce, reduce, broadcast, allgather, reduce_scatter and barrier. allreduce
and reduce take a `reduction` from REDUCTIONS ("sum" unless said: gradients); reduce_scatter
always sums. They work in place on `array` where the backend can and return the result array;
callers use the return value. A blocking collective that waits past the collective timeout
raises CommunicationError.

Async forms: every collective also has an `i` form (iallreduce, ireduce, ibroadcast,
iallgather, ireduce_scatter, ibarrier) and the bucketed forms (iallreduce_bucket,
ireduce_bucket, ibroadcast_bucket: several arrays packed into one buffer, one collective).
They return a Handle (`wait()` gives the result, `test()` says whether it is done) and run on
the communicator's progress engine (progress.py), in the order they were issued, which is the
same on every rank. `overlap=False` asks for a collective whose result is needed at once: it
runs now, after the ones issued before it, and its handle is already done. `wait_all()` waits
for every collective issued so far.

The watchdog: every wait of every form registers with the communicator's one watchdog
(`comm.watchdog`, watchdog.py), which alone decides its deadline (`timeout_s`, the collective
timeout) and what it reports when it never ends; `comm.watchdog.watching()` says which waits
it watches now.

>>> import numpy as np
>>> SelfCommunicator().iallreduce(np.ones(2)).wait()
array([1., 1.])
"""
from __future__ import annotations

import abc

import numpy as np

from ..errors import CommunicationError
from .handles import Handle, ThenHandle
from .progress import ImmediateEngine, ThreadEngine
from .watchdog import Watchdog

# fluid's c_allreduce_{sum,max,min,prod}; every backend has all four (MPI, NCCL, numpy)
REDUCTIONS = ("sum", "max", "min", "prod")


def check_reduction(reduction: str) -> str:
    if reduction not in REDUCTIONS:
        raise CommunicationError(
            f"unknown reduction {reduction!r}; the collectives reduce with one of {REDUCTIONS}")
    return reduction


def check_divisible(comm, array) -> None:
    """reduce_scatter's precondition, checked by each member before communicating (so every
    member refuses alike, none left waiting): every rank keeps an equal slice."""
    if array.size % comm.size:
        raise CommunicationError(
            f"{comm.describe()} reduce_scatter of {array.size} elements over {comm.size} "
            f"ranks: the size must be divisible by the number of ranks")


# kind -> Communicator class; each backend module registers its class (factory.py makes them)
BACKENDS: dict[str, type] = {}


def register_backend(kind: str):
    """Class decorator: make the Communicator class available to
    `create_communicator(kind, ...)` (its constructor's arguments are the options)."""

    def register(cls):
        if kind in BACKENDS:
            raise ValueError(f"communicator backend '{kind}' is registered twice")
        BACKENDS[kind] = cls
        return cls

    return register


class Communicator(abc.ABC):
    """rank/size, the blocking collectives, their async forms and the bucketed forms."""

    rank: int = 0
    size: int = 1
    _engine = None
    _watchdog = None

    # -- blocking ----------------------------------------------------------------------------
    @abc.abstractmethod
    def allreduce(self, array, reduction: str = "sum"):
        """`reduction` over ranks, elementwise; every rank gets the result."""

    @abc.abstractmethod
    def reduce(self, array, root: int, reduction: str = "sum"):
        """`reduction` over ranks into `root`'s array; other ranks' arrays are unspecified
        after."""

    @abc.abstractmethod
    def broadcast(self, array, root: int):
        """`root`'s array to every rank."""

    @abc.abstractmethod
    def allgather(self, array, out=None):
        """Concatenation over ranks along a new leading axis: shape (size,) + array.shape.
        With `out` (that shape, contiguous) the result is written there and `out` returned;
        `array` may be `out[rank]` itself (gathered in place: MPI then moves no local copy)."""

    @abc.abstractmethod
    def reduce_scatter(self, array):
        """Sum over ranks of `array` (length divisible by size), each rank keeping its
        1/size slice (rank order)."""

    @abc.abstractmethod
    def barrier(self):
        ...

    # -- async -------------------------------------------------------------------------------
    @property
    def engine(self):
        """This communicator's progress engine (made on first use)."""
        if self._engine is None:
            self._engine = self.make_engine()
        return self._engine

    def make_engine(self):
        """The progress engine for this backend: by default one thread running the fastest
        blocking calls in issue order (progress.ThreadEngine)."""
        return ThreadEngine(self)

    # -- the watchdog ------------------------------------------------------------------------
    @property
    def watchdog(self) -> Watchdog:
        """The one watchdog of this communicator's waits (made on first use)."""
        if self._watchdog is None:
            self._watchdog = self.make_watchdog()
        return self._watchdog

    def make_watchdog(self) -> Watchdog:
        """This backend's watchdog: by default its own, with SPMD_COLLECTIVE_TIMEOUT."""
        return Watchdog(self)

    def watch_with(self, watchdog: Watchdog) -> None:
        """Let `watchdog` watch this communicator's waits: for a part of a larger communicator
        (a stage of the hierarchical allreduce), whose waits are the whole one's."""
        self._watchdog = watchdog

    @property
    def timeout_s(self) -> float:
        """The collective timeout of this communicator's waits, in seconds (its watchdog's)."""
        return self.watchdog.timeout_s

    @timeout_s.setter
    def timeout_s(self, seconds: float) -> None:
        self.watchdog.timeout_s = seconds

    def iallreduce(self, array, reduction: str = "sum", overlap: bool = True) -> Handle:
        check_reduction(reduction)
        return self.engine.issue("allreduce", (array, reduction), overlap, lands_in=array)

    def ireduce(self, array, root: int, reduction: str = "sum", overlap: bool = True) -> Handle:
        check_reduction(reduction)
        return self.engine.issue("reduce", (array, root, reduction), overlap,
                                 label=f"reduce(root={root})", lands_in=array)

    def ibroadcast(self, array, root: int, overlap: bool = True) -> Handle:
        return self.engine.issue("broadcast", (array, root), overlap,
                                 label=f"broadcast(root={root})", lands_in=array)

    def iallgather(self, array, out=None, overlap: bool = True) -> Handle:
        """See allgather for `out`."""
        return self.engine.issue("allgather", (array, out), overlap, lands_in=out)

    def ireduce_scatter(self, array, out=None, overlap: bool = True) -> Handle:
        """With `out` (this rank's section, preallocated) the result is written there: a
        caller may hand `out` on before the collective completes. `array` must stay as it is
        until the handle completes."""
        return self.engine.issue("reduce_scatter", (array,), overlap, into=out, lands_in=out)

    def ibarrier(self, overlap: bool = True) -> Handle:
        return self.engine.issue("barrier", (), overlap)

    def iallreduce_bucket(self, arrays, reduction: str = "sum", bucket=None,
                          overlap: bool = True) -> Handle:
        """`arrays` packed into one buffer (`bucket`'s, reused every step, or a fresh one),
        allreduced at once; the handle's result is the list of reduced per-array views."""
        buf, views = pack(arrays, bucket)
        return ThenHandle(self.iallreduce(buf, reduction, overlap), views)

    def ireduce_bucket(self, arrays, root: int, reduction: str = "sum", bucket=None,
                       overlap: bool = True) -> Handle:
        buf, views = pack(arrays, bucket)
        return ThenHandle(self.ireduce(buf, root, reduction, overlap), views)

    def ibroadcast_bucket(self, arrays, root: int, bucket=None, overlap: bool = True) -> Handle:
        buf, views = pack(arrays, bucket)
        return ThenHandle(self.ibroadcast(buf, root, overlap), views)

    def wait_all(self) -> None:
        """Wait for every collective issued so far; re-raise the first failure."""
        if self._engine is not None:
            self._engine.wait_all()

    def close(self) -> None:
        """End the progress engine's and the watchdog's threads (the communicator's owner is
        gone; a later collective starts them again)."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        if self._watchdog is not None:
            self._watchdog.close()

    # -- diagnostics -------------------------------------------------------------------------
    def describe(self) -> str:
        return f"[rank {self.rank}/{self.size}]"

    def processes(self) -> int:
        """How many processes the members live in: `size`, unless members share a process
        (spmd.timeline aligns the ranks' clocks only with collectives that span every one)."""
        return self.size

    def missing(self) -> str:
        """After a timeout: which ranks never reached this rank's latest collective, as a
        sentence, or '' where the backend cannot tell."""
        return ""

    def untimed(self, op: str):
        """The fastest blocking form of `op` (a blocking method's name), for the progress
        engine, which runs it under the watchdog."""
        return getattr(self, op)


@register_backend("self")
class SelfCommunicator(Communicator):
    """A world of one: every collective is the identity. No MPI library needed."""

    def make_engine(self):
        return ImmediateEngine(self)

    def allreduce(self, array, reduction="sum"):
        check_reduction(reduction)
        return array

    def reduce(self, array, root, reduction="sum"):
        check_reduction(reduction)
        return array

    def broadcast(self, array, root):
        return array

    def allgather(self, array, out=None):
        return gathered_into(out, array.reshape((1,) + array.shape))

    def reduce_scatter(self, array):
        # a new flat array, as every other backend gives (callers may write to it)
        return array.reshape(-1).copy()

    def barrier(self):
        pass


def gathered_into(out, gathered):
    """`gathered` (an allgather's result) as the caller asked: written into `out` when given
    (unless it already is `out`), else a new array."""
    if out is None:
        return gathered.copy()
    if gathered is not out:
        out[...] = gathered
    return out


def pack(arrays, bucket=None):
    """(one contiguous buffer holding `arrays`, its views shaped like them). `bucket` (a
    bucket.Bucket) is reused when given; otherwise the buffer is fresh, so reducing it never
    changes the inputs (an array may be shared by several variables)."""
    if not arrays:
        raise CommunicationError("a bucketed collective needs at least one array")
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) > 1:
        raise CommunicationError(
            f"a bucket must hold one dtype, got {sorted(map(str, dtypes))}")
    xp = array_module(arrays[0])
    if bucket is not None:
        buf, views = bucket.get(xp)
        for a, view in zip(arrays, views):
            if a is not view:  # its producer may already have written it in place
                view[...] = a
        return buf, views
    if len(arrays) == 1:
        buf = xp.array(arrays[0], copy=True, order="C")
        return buf, [buf]
    buf = xp.empty(sum(a.size for a in arrays), dtype=arrays[0].dtype)
    views, start = [], 0
    for a in arrays:
        view = buf[start:start + a.size]
        view[...] = a.reshape(-1)
        views.append(view.reshape(a.shape))
        start += a.size
    return buf, views


def array_module(array):
    """numpy for host arrays, cupy for device arrays (imported only then)."""
    if isinstance(array, np.ndarray):
        return np
    import cupy

    return cupy
