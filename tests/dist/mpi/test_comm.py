"""MPI specifics under mpiexec: topology, bcast_bytes, the contiguity check, the arrival
board's wording, GPU-sharing detection. The collectives themselves, on every backend, are in
test_collective_suite.py."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from spmd.comm.mpi import MPICommunicator, world
from spmd.comm.topology import detect, same_key_on_a_node
from spmd.errors import CommunicationError

pytestmark = pytest.mark.mpi(min_size=1)


@pytest.fixture(scope="module")
def comm():
    return MPICommunicator()


# what the process manager told this process, read here independently of spmd.comm.topology:
# (rank, size, local rank, local size) variables of MPICH's Hydra and of Open MPI
_LAUNCHER_VARS = [("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
                  ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                   "OMPI_COMM_WORLD_LOCAL_SIZE")]


def test_topology_matches_the_process_manager(comm):
    names = next((n for n in _LAUNCHER_VARS if all(v in os.environ for v in n)), None)
    if names is None:
        pytest.skip("the process manager set none of " + ", ".join(v[0] for v in _LAUNCHER_VARS))
    want = tuple(int(os.environ[v]) for v in names)
    t = detect()
    assert (t.rank, t.size, t.local_rank, t.local_size) == want
    assert t.uses_mpi


def test_bcast_bytes_has_no_pickle(comm):
    payload = bytes(range(256)) * 3 if comm.rank == 0 else None
    assert comm.bcast_bytes(payload, 0) == bytes(range(256)) * 3


def test_non_contiguous_is_refused(comm):
    with pytest.raises(CommunicationError, match="contiguous"):
        comm.allreduce(np.zeros((4, 4))[:, 1])


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
