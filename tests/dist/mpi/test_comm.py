"""MPI specifics under mpiexec: topology, no pickle in bcast_bytes and the collectives, the
contiguity check, the arrival board's wording, GPU-sharing detection. The collectives
themselves, on every backend, are in test_collective_suite.py."""
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


def test_no_collective_moves_a_pickle(comm, tmp_path_factory):
    """bcast_bytes and every collective with pickling forbidden (pickle, _pickle and mpi4py's
    object serializer raise and record): they still work, and a pickle that would run code
    when loaded arrives as its own bytes, not loaded (the directory it makes is absent)."""
    from spmd.executor.fingerprint import check_same_program
    from spmd.fluid import Program, layers, program_guard
    from tests.no_pickle import detonator, forbid_pickle

    mark = str(tmp_path_factory.mktemp("no_pickle") / "ran") if comm.rank == 0 else None
    mark = comm.bcast_bytes(mark.encode() if mark else None, 0).decode()  # one path for all
    program = Program()
    with program_guard(program, Program()):
        layers.fc(layers.data("x", [3]), 2)
    with forbid_pickle() as guard:
        sent = detonator(mark)
        got = comm.bcast_bytes(sent if comm.rank == 0 else None, 0)
        assert got == detonator(mark) and type(got) is bytes
        np.testing.assert_array_equal(comm.allreduce(np.ones(3)), np.full(3, comm.size))
        np.testing.assert_array_equal(comm.broadcast(np.full(2, comm.rank), 0), np.zeros(2))
        np.testing.assert_array_equal(comm.allgather(np.array([comm.rank]))[:, 0],
                                      np.arange(comm.size))
        comm.barrier()
        check_same_program(program, comm)  # the start-up fingerprint exchange
    assert guard.calls == [] and not os.path.exists(mark)


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
