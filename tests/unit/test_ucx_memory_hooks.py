"""spmd turns UCX's memory hooks off (UCX_MEM_EVENTS=no) for a job Hydra started on one node,
before it loads MPI: they keep UCX's RDMA registration cache true, cost each rank about 40 ms
of its MPI start-up, and on one node MPICH's ranks talk through shared memory. Everywhere else
the hooks stay (spmd/comm/mpi.py)."""
from __future__ import annotations

import pytest

from spmd.comm.mpi import skip_ucx_memory_hooks_on_one_node as skip

HYDRA_ONE_NODE = {"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALNRANKS": "2",
                  "MPI_LOCALRANKID": "0"}


def test_a_hydra_job_on_one_node_gets_them_off():
    env = dict(HYDRA_ONE_NODE)
    assert skip(env) is True
    assert env["UCX_MEM_EVENTS"] == "no"


@pytest.mark.parametrize("value", ["yes", "no", ""])
def test_a_value_the_user_set_is_kept(value):
    env = dict(HYDRA_ONE_NODE, UCX_MEM_EVENTS=value)
    assert skip(env) is False
    assert env["UCX_MEM_EVENTS"] == value


@pytest.mark.parametrize("env", [
    dict(HYDRA_ONE_NODE, PMI_SIZE="4"),  # two ranks here, four in the job: several nodes
    dict(HYDRA_ONE_NODE, SPMD_JOIN_START="1"),  # a joined world may span nodes
    {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
     "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},  # another launcher, another MPI
    {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NODEID": "0",
     "SLURM_TASKS_PER_NODE": "2"},  # srun
    {},  # no launcher at all
], ids=["several-nodes", "joined-world", "open-mpi", "srun", "no-launcher"])
def test_anywhere_else_they_stay(env):
    env = dict(env)
    assert skip(env) is False
    assert "UCX_MEM_EVENTS" not in env
