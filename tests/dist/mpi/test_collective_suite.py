"""One collective suite, written once and run over every backend (docs/design.md).

Each backend is one entry of BACKENDS: an adapter saying how to make the communicators of this
process's members (one per process over MPI; one per place, run on threads, for in-process
groups), how to run a function on each member at once, and which array module it takes.
Adding a backend is adding an entry there; every test below then runs on it.

Every member's arrays are small integers computed from its rank (values()), so the expected
result of every reduction is exact in every dtype, in any order, and computed here in numpy
from rank and size alone. Members record what they got (Checks) and the main thread asserts
after every member finished its collectives, so a wrong value never leaves a rank behind the
others. Runs under mpiexec at any number of ranks, -n 1 included.
"""
from __future__ import annotations

import math
import re
import threading
import time

import numpy as np
import pytest

from spmd.comm.factory import create_communicator
from spmd.comm.local import LocalGroup
from spmd.comm.mpi import world
from spmd.comm.topology import detect, select_gpu
from spmd.errors import CommunicationError
from spmd.executor.buckets import Bucket

pytestmark = pytest.mark.mpi(min_size=1)

DTYPES = ["float16", "float32", "float64", "int32", "int64", "uint8"]  # what the kernels reduce
REDUCTIONS = ["sum", "max", "min", "prod"]
SMALL = [(0,), (1,), (3, 5)]  # no element, one, an odd number (2-D)
BIG_BYTES = 3 << 20  # several MiB: past MPI's short-message paths
BUCKETS = [[(2, 3), (0,), (1,), (5,)], [(4,)], [(0,)]]  # mixed shapes, one array, nothing
LONG_S = 60.0  # the suite's own collectives: a hang fails the test instead of stalling it
SHORT_S = 1.0  # the tests in which a member never arrives
UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def _gpu_count() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no cupy, no driver, no device: no GPU backend
        return 0


def _comm_mpi(timeout_s: float | None, track_arrivals: bool = False):
    # a communicator of its own: a test that leaves a collective pending never crosses another
    return create_communicator("mpi", comm=world().Dup(), timeout_s=timeout_s,
                               track_arrivals=track_arrivals)


def _join_late_over_mpi(mpi, late: int, rank: int) -> None:
    """The late member's process joins the allreduce of np.ones(2) the others gave up on."""
    if rank == late:
        mpi.timeout_s = LONG_S
        mpi.allreduce(np.ones(2))


class Backend:
    """How the suite drives one backend (the defaults: one member per process, numpy)."""

    name = ""
    gpu = False
    tracks_arrivals = False  # a timeout names the members that never arrived
    async_timeout_ends_job = False  # the watchdog ends the job (tests/dist/test_comm_watchdog)

    def skip_reason(self) -> str | None:
        if self.gpu and _gpu_count() == 0:
            return f"{self.name} needs cupy and a GPU"
        return None

    @property
    def xp(self):
        if self.gpu:
            import cupy

            return cupy
        return np

    def make(self, timeout_s: float | None, track_arrivals: bool = False) -> list:
        """This process's members' communicators (a collective over MPI: every rank calls);
        timeout_s None: SPMD_COLLECTIVE_TIMEOUT's."""
        raise NotImplementedError

    def run(self, comms: list, fn) -> list:
        """fn(comm) on each member at once; their results in member order."""
        return on_members(comms, fn)

    def join_late(self, comms: list, late: int) -> None:
        """After the others timed out: complete what they left pending in MPI."""


class MPIBackend(Backend):
    name, tracks_arrivals, async_timeout_ends_job = "mpi", True, True

    def make(self, timeout_s, track_arrivals=False):
        return [_comm_mpi(timeout_s, track_arrivals)]

    def join_late(self, comms, late):
        _join_late_over_mpi(comms[0], late, comms[0].rank)


class PersistentMPIBackend(MPIBackend):
    name = "mpi_persistent"

    def make(self, timeout_s, track_arrivals=False):
        return [create_communicator("mpi_persistent", comm=world().Dup(), timeout_s=timeout_s,
                                    track_arrivals=track_arrivals)]


class LocalBackend(Backend):
    """Places on threads of this process: each process is a world of its own."""

    name, places = "local", 3

    def make(self, timeout_s, track_arrivals=False):
        group = LocalGroup(self.places, timeout_s=timeout_s)
        return [create_communicator("local", group=group, index=i) for i in range(self.places)]

    def run(self, comms, fn):
        return on_members(comms, fn, group=comms[0].group)


class HierarchicalBackend(Backend):
    name, places = "hierarchical", 2

    def make(self, timeout_s, track_arrivals=False):
        outer = _comm_mpi(timeout_s, track_arrivals)
        group = LocalGroup(self.places, timeout_s=timeout_s)
        return [create_communicator("hierarchical", local=group.communicator(i), outer=outer)
                for i in range(self.places)]

    def run(self, comms, fn):
        return on_members(comms, fn, group=comms[0].local.group)

    def join_late(self, comms, late):
        # the late place's process never crossed to the others: its outer member joins
        outer = comms[0].outer
        _join_late_over_mpi(outer, late // self.places, outer.rank)


class StagedBackend(Backend):
    tracks_arrivals = True

    def __init__(self, gpu: bool = False):
        self.gpu, self.name = gpu, "staged-cupy" if gpu else "staged"

    def make(self, timeout_s, track_arrivals=False):
        if self.gpu:
            import cupy

            cupy.cuda.Device(select_gpu(detect(), _gpu_count())).use()
        return [create_communicator("staged", mpi=_comm_mpi(timeout_s, track_arrivals))]

    def join_late(self, comms, late):
        _join_late_over_mpi(comms[0].mpi, late, comms[0].rank)


class SelfBackend(Backend):
    name = "self"

    def make(self, timeout_s, track_arrivals=False):
        return [create_communicator("self")]


class NCCLBackend(Backend):
    name, gpu = "nccl", True

    def skip_reason(self):
        gpus, local = _gpu_count(), detect().local_size
        if gpus == 0:
            return "nccl needs cupy and a GPU"
        if gpus < local:
            return f"nccl needs one rank per GPU: {local} ranks on this node, {gpus} GPU(s)"
        return None

    def make(self, timeout_s, track_arrivals=False):
        side = _comm_mpi(LONG_S)  # only passes NCCL's unique id
        comm = create_communicator("nccl", device_id=select_gpu(detect(), _gpu_count()),
                                   mpi_comm=side, timeout_s=timeout_s)
        # NCCL connects the ranks in the first collective, which may take longer than a
        # short timeout: done here, under the long one
        short, comm.timeout_s = comm.timeout_s, LONG_S
        comm.barrier()
        comm.timeout_s = short
        return [comm]


# The one list of backends: every test runs over each (a skip says why one cannot run here).
BACKENDS = [MPIBackend(), PersistentMPIBackend(), LocalBackend(), HierarchicalBackend(),
            StagedBackend(), StagedBackend(gpu=True), SelfBackend(), NCCLBackend()]


def on_members(comms: list, fn, group: LocalGroup | None = None) -> list:
    """fn(comm) for every member, on threads when there are several; the first failure is
    raised after all ended (a failed place wakes the others waiting for it: group.abort)."""
    if len(comms) == 1:
        return [fn(comms[0])]
    results, errors = [None] * len(comms), []

    def run(i):
        try:
            results[i] = fn(comms[i])
        except BaseException as e:  # noqa: BLE001 - raised on the main thread below
            errors.append(e)
            if group is not None:
                group.abort()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(comms))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=2 * LONG_S)
    if any(t.is_alive() for t in threads):
        raise AssertionError(f"a member still runs after {2 * LONG_S:g} s: a hang")
    if errors:
        if group is not None:
            group.reset()
        raise errors[0]
    return results


PERIOD = 132  # values() repeats along the array: (7g + 3i) % 11, (g + i) % 3, (g + 2i) % 4


def _period(member: int, dtype: str, reduction: str, salt: int):
    g, i = member + salt, np.arange(PERIOD)
    signed = np.dtype(dtype).kind != "u"
    if reduction == "prod":
        v = 1 + ((g + i) % 3 == 0)
        if signed:
            v = np.where((g + 2 * i) % 4 == 1, -v, v)
    else:
        v = (7 * g + 3 * i) % 11 - (5 if signed else 0)
    return v.astype(dtype)


def values(member: int, shape: tuple, dtype: str, reduction: str = "sum", salt: int = 0):
    """Member `member`'s array: small integers, so every reduction below is exact in every
    dtype and order (products only of 1, 2 and their negatives: powers of two)."""
    return np.resize(_period(member, dtype, reduction, salt), math.prod(shape)).reshape(shape)


def reduced(size: int, shape: tuple, dtype: str, reduction: str = "sum", salt: int = 0):
    """The reduction over members 0..size-1 of values(): what every backend must give
    (periodic like them, so computed on one period)."""
    total = _period(0, dtype, reduction, salt)
    for g in range(1, size):
        UFUNCS[reduction](total, _period(g, dtype, reduction, salt), out=total)
    return np.resize(total, math.prod(shape)).reshape(shape)


def gathered(size: int, shape: tuple, dtype: str):
    return np.stack([values(g, shape, dtype) for g in range(size)])


def big(dtype: str) -> tuple:
    return (BIG_BYTES // np.dtype(dtype).itemsize + 1,)  # odd, too


def host(array):
    return np.array(array, copy=True) if isinstance(array, np.ndarray) else array.get()


def eventually(test) -> bool:
    """Whether test() turns True within LONG_S (polled, as a caller overlapping work would)."""
    deadline = time.monotonic() + LONG_S
    while not test():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True


class Checks:
    """What one member saw, recorded while it runs (host copies, taken then) and asserted on
    the main thread afterwards."""

    def __init__(self, backend: str, comm):
        self.where = f"{backend} member {comm.rank}/{comm.size}"
        self.items: list = []

    def equal(self, label: str, got, want) -> None:
        self.items.append((label, host(got), np.asarray(want)))

    def true(self, label: str, condition) -> None:
        self.items.append((label, bool(condition), None))

    def raises(self, label: str, call, pattern: str) -> str:
        """call() must raise CommunicationError whose message matches `pattern`."""
        try:
            call()
        except CommunicationError as e:
            self.true(f"{label}: {e!s:.300} should match {pattern!r}", re.search(pattern, str(e)))
            return str(e)
        self.true(f"{label}: no CommunicationError", False)
        return ""

    def verify(self) -> None:
        failures = []
        for label, got, want in self.items:
            if want is None:
                if not got:
                    failures.append(label)
                continue
            if got.dtype == want.dtype and got.shape == want.shape and \
                    np.array_equal(got, want):
                continue  # the fast path: numpy's assertion is ten times slower on MiBs
            try:
                np.testing.assert_array_equal(got, want, strict=True)  # says where they differ
            except AssertionError as e:
                failures.append(f"{label}: {str(e).strip()[:600]}")
        assert not failures, f"{self.where}: {len(failures)} failed:\n" + "\n".join(failures[:12])


class Case:
    """A backend with its communicators for this process's members."""

    def __init__(self, backend: Backend, comms: list):
        self.backend, self.comms = backend, comms
        self.size = comms[0].size

    def array(self, host_array):
        return self.backend.xp.array(host_array, copy=True)

    def check(self, body) -> None:
        """body(comm, checks) on every member; then every member's checks."""

        def member(comm):
            checks = Checks(self.backend.name, comm)
            body(comm, checks)
            return checks

        for checks in self.backend.run(self.comms, member):
            checks.verify()


@pytest.fixture(scope="module", params=BACKENDS, ids=lambda b: b.name)
def backend(request):
    reason = request.param.skip_reason()  # the same on every rank: they skip together
    if reason:
        pytest.skip(reason)
    return request.param


@pytest.fixture(scope="module")
def case(backend):
    comms = backend.make(LONG_S)
    yield Case(backend, comms)
    for comm in comms:
        comm.close()


@pytest.fixture(scope="module")
def control():
    """Lines the ranks up between the phases of a test (its own communicator)."""
    return _comm_mpi(LONG_S)


def test_members_are_ranked_0_to_size_process_by_process(case):
    """Ranks 0..size-1, in the order of (MPI rank, member within the process): a process's
    places are consecutive ranks (hierarchical: MPI rank * places + place)."""
    me = world().Get_rank()

    def body(comm, check):
        check.true(f"rank {comm.rank} within size {comm.size}", 0 <= comm.rank < comm.size)
        mine = np.array([comm.rank, me, case.comms.index(comm)], dtype=np.int64)
        every = host(comm.allgather(case.array(mine)))
        check.equal("every member's rank, gathered in rank order", every[:, 0],
                    np.arange(comm.size))
        where = [tuple(row) for row in every[:, 1:].tolist()]
        check.true(f"process by process, member by member: {where}", where == sorted(where))

    case.check(body)


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_and_reduce_in_place_with_every_reduction(case, dtype):
    size = case.size

    def body(comm, check):
        for shape in SMALL:
            for reduction in REDUCTIONS:
                want, at = reduced(size, shape, dtype, reduction), f"{reduction} of {shape}"
                a = case.array(values(comm.rank, shape, dtype, reduction))
                out = comm.allreduce(a, reduction)
                check.true(f"allreduce {at} returns its array", out is a)
                check.equal(f"allreduce {at}", out, want)
                for root in sorted({0, size - 1}):
                    a = case.array(values(comm.rank, shape, dtype, reduction))
                    out = comm.reduce(a, root, reduction)
                    check.true(f"reduce {at} returns its array", out is a)
                    if comm.rank == root:
                        check.equal(f"reduce {at} to {root}", out, want)

    case.check(body)


@pytest.mark.parametrize("overlap", [False, True])
def test_allgather_into_out_and_in_place(case, overlap):
    """allgather / iallgather with `out`: written there (blocking and async); with the array
    being out[rank] itself, gathered in place; a wrongly shaped `out` is refused."""
    size = case.size

    def body(comm, check):
        for shape in [(0,), (1,), (3, 5)]:
            want = gathered(size, shape, "float32")
            out = case.array(np.full((size,) + shape, -1, "float32"))
            a = case.array(values(comm.rank, shape, "float32"))
            got = comm.iallgather(a, out=out, overlap=overlap).wait()
            check.true(f"iallgather of {shape} into out returns out", got is out)
            check.equal(f"iallgather of {shape} into out", out, want)
            check.equal(f"iallgather of {shape}: its input", a, values(comm.rank, shape,
                                                                        "float32"))
            buf = case.array(np.full((size,) + shape, -1, "float32"))
            buf[comm.rank] = case.array(values(comm.rank, shape, "float32"))
            got = comm.allgather(buf[comm.rank], out=buf)
            check.true(f"allgather of {shape} in place returns out", got is buf)
            check.equal(f"allgather of {shape} in place", buf, want)

    case.check(body)


@pytest.mark.parametrize("overlap", [False, True])
def test_the_same_array_reduced_step_after_step(case, overlap):
    """As a gradient bucket is, every step: one array refilled and allreduced again (in
    blocking and async forms, with several reductions interleaved), right every time."""
    size = case.size

    def body(comm, check):
        bucket = case.array(values(comm.rank, (37,), "float32"))
        for step in range(4):
            for reduction in ("sum", "max"):
                bucket[...] = case.array(values(comm.rank, (37,), "float32", reduction, step))
                want = reduced(size, (37,), "float32", reduction, step)
                at = f"step {step} {reduction}"
                if step % 2:
                    out = comm.iallreduce(bucket, reduction, overlap=overlap).wait()
                else:
                    out = comm.allreduce(bucket, reduction)
                check.true(f"{at}: the bucket itself", out is bucket)
                check.equal(at, out, want)

    case.check(body)


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_allgather_reduce_scatter_and_barrier(case, dtype):
    size = case.size

    def body(comm, check):
        for shape in SMALL:
            for root in sorted({0, size - 1}):
                a = case.array(values(comm.rank, shape, dtype))
                out = comm.broadcast(a, root)
                check.true(f"broadcast of {shape} returns its array", out is a)
                check.equal(f"broadcast of {shape} from {root}", out, values(root, shape, dtype))
            a = case.array(values(comm.rank, shape, dtype))
            out = comm.allgather(a)
            check.true(f"allgather of {shape} gives a new array", out is not a)
            check.equal(f"allgather of {shape}", out, gathered(size, shape, dtype))
            check.equal(f"allgather of {shape}: its input", a, values(comm.rank, shape, dtype))
        for k in (0, 1, 5):
            a = case.array(values(comm.rank, (size, k), dtype))
            out = comm.reduce_scatter(a)
            check.true(f"reduce_scatter of {size} x {k} gives a new array", out is not a)
            check.equal(f"reduce_scatter of {size} x {k}", out,
                        reduced(size, (size, k), dtype)[comm.rank])
        comm.barrier()

    case.check(body)


@pytest.mark.parametrize("dtype", DTYPES)
def test_arrays_of_several_mib(case, dtype):
    size, shape = case.size, big(dtype)
    k = shape[0] // size + 1

    def body(comm, check):
        want = reduced(size, shape, dtype)
        check.equal("allreduce", comm.allreduce(case.array(values(comm.rank, shape, dtype))),
                    want)
        handle = comm.iallreduce(case.array(values(comm.rank, shape, dtype)))
        check.equal("iallreduce", handle.wait(), want)
        out = comm.reduce(case.array(values(comm.rank, shape, dtype)), 0)
        if comm.rank == 0:
            check.equal("reduce", out, want)
        out = comm.broadcast(case.array(values(comm.rank, shape, dtype)), size - 1)
        check.equal("broadcast", out, values(size - 1, shape, dtype))
        check.equal("allgather", comm.allgather(case.array(values(comm.rank, shape, dtype))),
                    gathered(size, shape, dtype))
        out = comm.reduce_scatter(case.array(values(comm.rank, (size, k), dtype)))
        check.equal("reduce_scatter", out, reduced(size, (size, k), dtype)[comm.rank])

    case.check(body)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "at-once"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_async_forms(case, dtype, overlap):
    """Each i-form: handle.out (where the result lands), test() turning True without a wait,
    wait() giving the result; overlap=False has run when it returns."""
    size = case.size

    def issued(check, label, handle, want, array=None):
        if not overlap and array is not None:
            check.equal(f"{label} ran at once", array, want)
        if array is not None:
            check.true(f"{label}: handle.out is its array", handle.out is array)
        check.true(f"{label}: test() turns True", eventually(handle.test))
        out = handle.wait()
        check.equal(label, out, want)
        return out

    def body(comm, check):
        for shape in SMALL:
            for reduction in REDUCTIONS:
                want, at = reduced(size, shape, dtype, reduction), f"{reduction} of {shape}"
                a = case.array(values(comm.rank, shape, dtype, reduction))
                out = issued(check, f"iallreduce {at}",
                             comm.iallreduce(a, reduction, overlap=overlap), want, a)
                check.true(f"iallreduce {at}: wait() gives its array", out is a)
                a = case.array(values(comm.rank, shape, dtype, reduction))
                handle = comm.ireduce(a, size - 1, reduction, overlap=overlap)
                if comm.rank == size - 1:
                    issued(check, f"ireduce {at}", handle, want, a)
                handle.wait()
            a = case.array(values(comm.rank, shape, dtype))
            issued(check, f"ibroadcast of {shape}", comm.ibroadcast(a, 0, overlap=overlap),
                   values(0, shape, dtype), a)
            a = case.array(values(comm.rank, shape, dtype))
            issued(check, f"iallgather of {shape}", comm.iallgather(a, overlap=overlap),
                   gathered(size, shape, dtype))
        for k in (0, 1, 5):
            want = reduced(size, (size, k), dtype)[comm.rank]
            a = case.array(values(comm.rank, (size, k), dtype))
            into = case.array(np.zeros(k, dtype))
            out = issued(check, f"ireduce_scatter of {size} x {k} into out=",
                         comm.ireduce_scatter(a, out=into, overlap=overlap), want, into)
            check.true("ireduce_scatter: wait() gives out=", out is into)
            issued(check, f"ireduce_scatter of {size} x {k}",
                   comm.ireduce_scatter(a.copy(), overlap=overlap), want)
        handle = comm.ibarrier(overlap=overlap)
        check.true("ibarrier: test() turns True", eventually(handle.test))
        handle.wait()
        comm.wait_all()

    case.check(body)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "at-once"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_bucketed_forms_never_change_their_inputs(case, dtype, overlap):
    """Several arrays in one buffer, one collective: fresh buffers and a persistent bucket
    (reused step after step: its views are the results)."""
    size, xp = case.size, case.backend.xp

    def inputs(comm, shapes, reduction="sum", salt=0):
        return [case.array(values(comm.rank, s, dtype, reduction, salt + j))
                for j, s in enumerate(shapes)]

    def results(check, label, handle, want, arrays, before):
        got = handle.wait()
        check.true(f"{label}: wait() gives handle.out", got is handle.out)
        check.true(f"{label}: one view per array", len(got) == len(want))
        for j, (view, expected) in enumerate(zip(got, want)):
            check.equal(f"{label}: array {j}", view, expected)
        for j, (a, b) in enumerate(zip(arrays, before)):
            check.equal(f"{label}: input {j} unchanged", a, b)
        return got

    def body(comm, check):
        for shapes in BUCKETS:
            for reduction in REDUCTIONS:
                arrays = inputs(comm, shapes, reduction)
                before = [host(a) for a in arrays]
                want = [reduced(size, s, dtype, reduction, j) for j, s in enumerate(shapes)]
                results(check, f"iallreduce_bucket {reduction} of {shapes}",
                        comm.iallreduce_bucket(arrays, reduction, overlap=overlap),
                        want, arrays, before)
                arrays = inputs(comm, shapes, reduction)
                handle = comm.ireduce_bucket(arrays, size - 1, reduction, overlap=overlap)
                if comm.rank == size - 1:
                    results(check, f"ireduce_bucket {reduction} of {shapes}", handle, want,
                            arrays, before)
                handle.wait()
            arrays = inputs(comm, shapes)
            before = [host(a) for a in arrays]
            results(check, f"ibroadcast_bucket of {shapes}",
                    comm.ibroadcast_bucket(arrays, 0, overlap=overlap),
                    [values(0, s, dtype, salt=j) for j, s in enumerate(shapes)], arrays, before)
            # a persistent bucket: its views are the results, every step
            bucket = Bucket(shapes, dtype)
            arrays = inputs(comm, shapes)
            before = [host(a) for a in arrays]
            want = [reduced(size, s, dtype, salt=j) for j, s in enumerate(shapes)]
            got = results(check, f"a bucket's first step, {shapes}",
                          comm.iallreduce_bucket(arrays, bucket=bucket, overlap=overlap), want,
                          arrays, before)
            views = bucket.get(xp)[1]
            check.true("the results are the bucket's views",
                       all(g is v for g, v in zip(got, views)))
            # the next step: the first array's producer wrote it into its view already
            arrays = inputs(comm, shapes, "max", salt=10)
            views[0][...] = arrays[0]
            arrays[0] = views[0]
            want = [reduced(size, s, dtype, "max", 10 + j) for j, s in enumerate(shapes)]
            got = comm.iallreduce_bucket(arrays, "max", bucket=bucket, overlap=overlap).wait()
            check.true("the next step's results are the same views",
                       all(g is v for g, v in zip(got, views)))
            for j, (view, expected) in enumerate(zip(got, want)):
                check.equal(f"a bucket's next step, {shapes}: array {j}", view, expected)
        comm.wait_all()

    case.check(body)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_async_ops_complete_in_issue_order(case, dtype):
    """Several collectives in flight, then wait_all: each ran after the ones issued before it
    (these give other results in another order); an op at once runs after them too."""
    size, last = case.size, case.size - 1

    def body(comm, check):
        a = case.array(values(comm.rank, (7,), dtype))
        comm.ireduce(a, last)  # the sum on `last` ...
        comm.ibroadcast(a, last)  # ... then to everyone: everyone has the sum
        b = case.array(values(comm.rank, (3,), dtype))
        comm.iallreduce(b, "max")
        comm.iallreduce(b, "min")  # all equal by now: min is the max
        gather = comm.iallgather(case.array(values(comm.rank, (2,), dtype)))
        into = case.array(np.zeros(3, dtype))
        comm.ireduce_scatter(case.array(values(comm.rank, (size, 3), dtype)), out=into)
        bucket = comm.iallreduce_bucket([case.array(values(comm.rank, s, dtype, salt=j))
                                         for j, s in enumerate(BUCKETS[0])])
        handles = [gather, bucket, comm.ibarrier()]
        comm.wait_all()
        check.true("every handle done after wait_all", all(h.test() for h in handles))
        check.equal("ireduce, then ibroadcast", a, reduced(size, (7,), dtype))
        check.equal("max, then min", b, reduced(size, (3,), dtype, "max"))
        check.equal("iallgather", gather.wait(), gathered(size, (2,), dtype))
        check.equal("ireduce_scatter", into, reduced(size, (size, 3), dtype)[comm.rank])
        for j, (view, s) in enumerate(zip(bucket.out, BUCKETS[0])):
            check.equal(f"iallreduce_bucket array {j}", view, reduced(size, s, dtype, salt=j))
        comm.wait_all()  # nothing pending: returns at once
        c = case.array(values(comm.rank, (4,), dtype))
        comm.iallreduce(c)
        comm.iallreduce(case.array(values(comm.rank, (1,), dtype)), overlap=False)
        check.equal("an overlapped op is done once an op at once issued after it returns",
                    c, reduced(size, (4,), dtype))
        comm.wait_all()

    case.check(body)


def test_wrong_calls_are_refused_before_communicating(case):
    """Every member refuses on its own, so none is left waiting (the barrier after)."""
    size = case.size

    def body(comm, check):
        x = case.array(values(comm.rank, (4,), "float32"))
        unknown = "unknown reduction 'mean'"
        check.raises("allreduce", lambda: comm.allreduce(x, "mean"), unknown)
        check.raises("reduce", lambda: comm.reduce(x, 0, "mean"), unknown)
        check.raises("iallreduce", lambda: comm.iallreduce(x, "mean").wait(), unknown)
        check.raises("ireduce", lambda: comm.ireduce(x, 0, "mean").wait(), unknown)
        check.raises("iallreduce_bucket", lambda: comm.iallreduce_bucket([x], "mean"), unknown)
        check.raises("an empty bucket", lambda: comm.iallreduce_bucket([]), "at least one")
        mixed = [x, case.array(np.zeros(2, "int64"))]
        check.raises("a bucket of two dtypes", lambda: comm.ibroadcast_bucket(mixed, 0),
                     "one dtype")
        if size > 1:
            odd = case.array(values(comm.rank, (2 * size + 1,), "float32"))
            check.raises("reduce_scatter", lambda: comm.reduce_scatter(odd), "divisible")
            check.raises("ireduce_scatter", lambda: comm.ireduce_scatter(odd).wait(),
                         "divisible")
        comm.barrier()
        comm.wait_all()

    case.check(body)


_KEEP = []  # arrays of collectives given up on: MPI completes them when the late one joins

# (form, arrival board, where the short timeout comes from)
NEVER_ARRIVES = [("blocking", False, "timeout_s"), ("async", False, "timeout_s"),
                 ("blocking", True, "timeout_s"), ("async", True, "timeout_s"),
                 ("blocking", False, "SPMD_COLLECTIVE_TIMEOUT")]


@pytest.mark.parametrize("form, tracked, source", NEVER_ARRIVES,
                         ids=["-".join(["board"] * t + [f, s]) for f, t, s in NEVER_ARRIVES])
def test_a_member_that_never_arrives_fails_the_others_naming_the_op(backend, control,
                                                                    monkeypatch, form, tracked,
                                                                    source):
    """The last member never reaches an allreduce: every other member's fails within the
    short timeout (the communicators' timeout_s, or SPMD_COLLECTIVE_TIMEOUT when they are
    made) with a CommunicationError naming the op (and, with an arrival board, the member
    that never came), instead of hanging. Then it joins late, so the ranks line up again."""
    if tracked and not backend.tracks_arrivals:
        pytest.skip(f"{backend.name} keeps no arrival board")
    if form == "async" and backend.async_timeout_ends_job:
        pytest.skip("an async collective that times out ends the job there: "
                    "tests/dist/test_comm_watchdog.py")
    if source == "timeout_s":
        comms = backend.make(SHORT_S, track_arrivals=tracked)
    else:
        monkeypatch.setenv("SPMD_COLLECTIVE_TIMEOUT", f"{SHORT_S:g}")
        comms = backend.make(None, track_arrivals=tracked)
        monkeypatch.undo()  # read when they were made: the setting is as it was again
    case = Case(backend, comms)
    if case.size < 2:
        for comm in comms:
            comm.close()
        pytest.skip("needs a second member that stays away")
    late = case.size - 1
    # "[rank 0/2] allreduce did not complete within 1 s", "[place 0/3] allreduce: ... did not
    # arrive within 1 s", "[rank 0/2] NCCL allreduce (...) did not complete within 1 s"
    names = rf"\[(rank|place) \d+/\d+\] (NCCL )?allreduce\b.* within {SHORT_S:g} s"

    def body(comm, check):
        comm.barrier()  # collective #1, everyone's (it sets the arrival board up)
        if comm.rank == late:
            return
        x = case.array(np.ones(2))
        _KEEP.append(x)
        if form == "blocking":
            message = check.raises("allreduce", lambda: comm.allreduce(x), names)
        else:
            message = check.raises("iallreduce", lambda: (comm.iallreduce(x), comm.wait_all()),
                                   names)
        if tracked:
            check.true(f"names rank {late}: {message}", re.search(
                rf"rank\(s\) {late} \(its last was #1, barrier\) never reached it", message))

    try:
        case.check(body)
    finally:
        control.barrier()  # every other member gave up
        backend.join_late(comms, late)
        control.barrier()
        for comm in comms:
            comm.close()
