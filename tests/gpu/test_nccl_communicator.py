"""spmd's NCCL communicator itself, on one GPU: a world of one still makes a real NCCL
communicator (unique id through MPI, NcclCommunicator, the collective stream), which the
data-parallel runner at one rank never builds (it needs nobody to talk to). Each collective's
result is what one rank must get; the async form runs on its own stream and the compute
stream waits for it."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def comm():
    from spmd.comm.factory import create_communicator
    from spmd.comm.mpi import MPICommunicator

    return create_communicator("nccl", device_id=0, mpi_comm=MPICommunicator())


def test_a_world_of_one_makes_a_real_nccl_communicator(comm):
    assert (comm.rank, comm.size) == (0, 1)
    assert "NCCL" in type(comm).__name__.upper()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64"])
def test_collectives_of_one_rank(comm, dtype):
    import cupy

    host = np.arange(12).reshape(3, 4).astype(dtype)
    x = cupy.asarray(host)
    np.testing.assert_array_equal(cupy.asnumpy(comm.allreduce(x.copy())), host)
    np.testing.assert_array_equal(cupy.asnumpy(comm.allreduce(x.copy(), "max")), host)
    np.testing.assert_array_equal(cupy.asnumpy(comm.broadcast(x.copy(), 0)), host)
    np.testing.assert_array_equal(cupy.asnumpy(comm.reduce(x.copy(), 0)), host)
    np.testing.assert_array_equal(cupy.asnumpy(comm.allgather(x.copy())), host[None])
    np.testing.assert_array_equal(cupy.asnumpy(comm.reduce_scatter(x.copy().ravel())),
                                  host.ravel())
    comm.barrier()


def test_async_allreduce_on_its_own_stream_orders_the_compute_stream(comm):
    import cupy

    x = cupy.ones(1 << 20, dtype=cupy.float32)
    x *= 3  # compute-stream work the collective must wait for
    handle = comm.iallreduce(x)
    handle.wait()  # the compute stream now waits for the collective; the host does not
    y = x + 1
    assert float(y.sum()) == 4.0 * (1 << 20)
