"""Collectives under mpiexec: expected values computed from rank and size."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from spmd.comm.local import HierarchicalCommunicator, LocalGroup
from spmd.comm.mpi import MPICommunicator, world
from spmd.comm.topology import detect, same_key_on_a_node
from spmd.errors import CommunicationError

pytestmark = pytest.mark.mpi(min_size=1)


@pytest.fixture(scope="module")
def comm():
    return MPICommunicator()


def test_topology_matches_mpi(comm):
    t = detect()
    assert (t.rank, t.size) == (world().Get_rank(), world().Get_size())
    assert t.uses_mpi and 0 <= t.local_rank < t.local_size <= t.size


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_allreduce_sums(comm, dtype):
    r, n = comm.rank, comm.size
    a = np.arange(5, dtype=dtype) + r
    out = comm.allreduce(a)
    np.testing.assert_array_equal(out, n * np.arange(5, dtype=dtype) + n * (n - 1) // 2)


def test_iallreduce_overlaps(comm):
    reqs = [comm.iallreduce(np.full(3, float(comm.rank + i))) for i in range(4)]
    for i, req in enumerate(reqs):
        np.testing.assert_array_equal(req.wait(), comm.size * i + comm.size * (comm.size - 1) / 2)


def test_reduce_broadcast_allgather_reduce_scatter(comm):
    r, n = comm.rank, comm.size
    root = n - 1
    a = np.full(4, r + 1.0)
    comm.reduce(a, root)
    if r == root:
        np.testing.assert_array_equal(a, n * (n + 1) / 2)
    b = np.full(3, float(r))
    np.testing.assert_array_equal(comm.broadcast(b, root), float(root))
    g = comm.allgather(np.array([r, 10 * r]))
    np.testing.assert_array_equal(g, np.stack([np.arange(n), 10 * np.arange(n)], axis=1))
    rs = comm.reduce_scatter(np.arange(3 * n, dtype=np.float64) * (r + 1))
    np.testing.assert_array_equal(rs, np.arange(3 * n)[3 * r:3 * r + 3] * n * (n + 1) / 2)
    comm.barrier()


def _expected(reduction: str, ranks):
    """Rank g contributes [g+1, -(g+1)]: the reduction over `ranks` in closed form."""
    values = np.array([[g + 1, -(g + 1)] for g in ranks], dtype=np.float64)
    return {"sum": values.sum(0), "max": values.max(0), "min": values.min(0),
            "prod": values.prod(0)}[reduction]


@pytest.mark.parametrize("reduction", ["sum", "max", "min", "prod"])
def test_allreduce_and_reduce_with_each_reduction(comm, reduction):
    r, n = comm.rank, comm.size
    want = _expected(reduction, range(n))
    np.testing.assert_array_equal(comm.allreduce(np.array([r + 1.0, -(r + 1.0)]), reduction),
                                  want)
    np.testing.assert_array_equal(
        comm.iallreduce(np.array([r + 1.0, -(r + 1.0)]), reduction).wait(), want)
    np.testing.assert_array_equal(
        comm.untimed("allreduce")(np.array([r + 1.0, -(r + 1.0)]), reduction), want)
    root = n - 1
    for reduce in (comm.reduce, comm.untimed("reduce")):
        a = reduce(np.array([r + 1.0, -(r + 1.0)]), root, reduction)
        if r == root:
            np.testing.assert_array_equal(a, want)


def test_an_unknown_reduction_is_refused_before_communicating(comm):
    with pytest.raises(CommunicationError, match="unknown reduction 'mean'"):
        comm.allreduce(np.zeros(2), "mean")
    comm.barrier()  # every rank refused on its own; nobody is left waiting


def test_bcast_bytes_has_no_pickle(comm):
    payload = bytes(range(256)) * 3 if comm.rank == 0 else None
    assert comm.bcast_bytes(payload, 0) == bytes(range(256)) * 3


def test_non_contiguous_is_refused(comm):
    with pytest.raises(CommunicationError, match="contiguous"):
        comm.allreduce(np.zeros((4, 4))[:, 1])


def test_hierarchical_two_places_per_process(comm):
    places = 2
    group = LocalGroup(places, timeout_s=30)
    results = [None] * places

    def run(i):
        h = HierarchicalCommunicator(group.communicator(i), comm)
        a = np.full(3, float(h.rank + 1))
        results[i] = (h.rank, h.size, h.allreduce(a).copy(),
                      h.broadcast(np.full(2, float(h.rank)), h.size - 1).copy(),
                      {kind: h.allreduce(np.array([h.rank + 1.0, -(h.rank + 1.0)]), kind).copy()
                       for kind in ("max", "min", "prod")},
                      h.reduce(np.array([h.rank + 1.0, -(h.rank + 1.0)]), 0, "max").copy())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(places)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = places * comm.size
    for i, (rank, size, summed, bcast, reduced, biggest) in enumerate(results):
        assert (rank, size) == (comm.rank * places + i, total)
        np.testing.assert_array_equal(summed, total * (total + 1) / 2)
        np.testing.assert_array_equal(bcast, total - 1)
        for kind, got in reduced.items():
            np.testing.assert_array_equal(got, _expected(kind, range(total)), err_msg=kind)
        if rank == 0:
            np.testing.assert_array_equal(biggest, _expected("max", range(total)))


def test_timeout_names_the_op_instead_of_hanging(comm):
    if comm.size < 2:
        pytest.skip("needs a second rank that stays away")  # still passes at -n 1 as a file
    side = MPICommunicator(world().Dup(), timeout_s=1.0)
    if comm.rank != 0:
        timed_out = r"\[rank \d+/\d+\] allreduce did not complete"
        with pytest.raises(CommunicationError, match=timed_out):
            side.allreduce(np.ones(2))
    comm.barrier()
    if comm.rank == 0:  # join late, completing the others' pending allreduce
        MPICommunicator(side.comm, timeout_s=30).allreduce(np.ones(2))
    comm.barrier()


def test_timeout_names_the_ranks_that_never_reached_the_collective(comm):
    if comm.size < 2:
        pytest.skip("needs a second rank that stays away")
    side = MPICommunicator(world().Dup(), timeout_s=1.0, track_arrivals=True)
    side.barrier()  # collective #1, on every rank
    late = comm.size - 1
    if comm.rank != late:
        others = sorted(set(range(comm.size)) - {late, comm.rank})
        too = rf".*rank\(s\) \[{', '.join(map(str, others))}\] wait in it too" if others else ""
        with pytest.raises(CommunicationError,
                           match=rf"\[rank {comm.rank}/{comm.size}\] allreduce did not complete "
                                 rf"within 1 s: collective #2 on this communicator: rank\(s\) "
                                 rf"{late} \(its last was #1, barrier\) never reached it{too}"):
            side.allreduce(np.ones(2))  # collective #2; still posted when it raises
    else:
        time.sleep(2.0)  # the others time out meanwhile
        side.timeout_s = 30.0
        np.testing.assert_array_equal(side.allreduce(np.ones(2)), np.full(2, comm.size))
    comm.barrier()


def test_same_key_on_a_node_is_one_answer_for_the_job(comm):
    """How GPU sharing is found (PCI bus ids); here with made-up keys."""
    t = detect()
    assert not same_key_on_a_node(world(), f"gpu-of-rank-{t.rank}")
    # ranks 0 and 1 share a key (on one node here), the others have their own: every rank,
    # the ones without a duplicate too, gets the same answer
    key = "gpu-shared" if t.rank < 2 else f"gpu-of-rank-{t.rank}"
    assert same_key_on_a_node(world(), key) == (t.size >= 2)
