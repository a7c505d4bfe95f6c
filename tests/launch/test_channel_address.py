"""Rank 0's supervisor listens only where the job can reach it (issue 23 item 8): the node's
address the launcher names, loopback for a one-node job, never every interface; a job over
several nodes with no address named fails at its first MPI use, saying what to set, instead of
listening everywhere. Several nodes are emulated here by telling the ranks that each is alone
on its node (MPI_LOCALNRANKS=1, set under mpiexec, which sets its own first)."""
from __future__ import annotations

from launch_helpers import MPIEXEC, PYTHON, run

from spmd.guard.channel import interface_addresses

PROGRAM = ("from spmd import guard\n"
           "from spmd.comm.topology import detect\n"
           "t = detect()\n"
           "print(f'rank {t.rank} of {t.size} supervised={guard.supervised()}', flush=True)\n")


def _job(token, *env: str):
    return run([MPIEXEC, "-n", "2", "env", "MPI_LOCALNRANKS=1", *env, PYTHON, "-c", PROGRAM],
               token, timeout=120)


def test_a_multi_node_job_without_an_address_fails_saying_what_to_set(token):
    res = _job(token, "PMI_HOSTNAME=nowhere.invalid")
    assert res.returncode != 0, res.output[-3000:]
    assert "[rank 0/2] FAILED: CommunicationError: [rank 0/2] rank 0's supervisor" in \
        res.output, res.output[-3000:]
    for words in ("has no address to listen on", "2 ranks, 1 of them on this one",
                  "PMI_HOSTNAME=nowhere.invalid: not an address of this machine",
                  "Set POD_IP=<this node's address>", "SPMD_SUPERVISE=0"):
        assert words in res.output, res.output[-3000:]
    assert "supervised=" not in res.output


def test_the_address_the_launcher_names_carries_the_channel(token):
    mine = interface_addresses()
    assert mine, "this machine has no interface address but loopback"
    for named in (f"POD_IP={mine[0]}", f"PMI_HOSTNAME={mine[0]}"):
        res = _job(token, named)
        assert res.returncode == 0, res.output[-3000:]
        for rank in (0, 1):
            assert f"rank {rank} of 2 supervised=True" in res.output, res.output[-3000:]
