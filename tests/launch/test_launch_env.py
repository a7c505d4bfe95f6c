"""The environment contract: what each worker gets (rank, size, endpoints, GPU, logs), read
back by spmd's own readers (spmd.flags, spmd.comm.topology); the command line built for one and
for several nodes; scheduler detection."""
from __future__ import annotations

import pytest

from launch import scheduler as sched
from launch.config import LaunchConfig
from launch.env import job_env, mpi_worker_env, worker_env
from launch.job import command, worker_program
from launch.mpi import HYDRA, OPENMPI, MPIInfo
from spmd.comm.topology import check_paddle_env
from spmd.flags import flags

HYDRA_MPI = MPIInfo("MPICH", "5.0.2", HYDRA, "/venv/bin/mpiexec")
OPEN_MPI = MPIInfo("Open MPI", "5.0.0", OPENMPI, "/usr/bin/mpirun")


def two_nodes(**kw) -> LaunchConfig:
    return LaunchConfig("train.py", ["--epochs", "3"], nproc_per_node=2,
                        cluster_node_ips=["10.0.0.1", "10.0.0.2"], node_ip="10.0.0.1",
                        log_dir="/logs", python="/venv/bin/python", **kw)


def test_every_rank_gets_its_identity():
    cfg = two_nodes(selected_gpus=[2, 3], collective_timeout=5)
    base = {"http_proxy": "http://proxy:3128", "HTTPS_PROXY": "x", "HOME": "/root"}
    endpoints = "10.0.0.1:6170,10.0.0.1:6171,10.0.0.2:6170,10.0.0.2:6171"
    for rank in range(4):
        env = worker_env(cfg, rank, base)
        assert env["PADDLE_TRAINER_ID"] == str(rank)
        assert env["PADDLE_TRAINERS_NUM"] == "4"
        assert env["PADDLE_TRAINER_ENDPOINTS"] == endpoints
        assert env["PADDLE_CURRENT_ENDPOINT"] == endpoints.split(",")[rank]
        assert env["FLAGS_selected_gpus"] == str([2, 3][rank % 2])
        assert env["SPMD_WORKER_LOG"] == f"/logs/workerlog.{rank}"
        assert env["SPMD_STATUS_FILE"] == f"/logs/workerstatus.{rank}"
        assert env["SPMD_COLLECTIVE_TIMEOUT"] == "5"
        assert "http_proxy" not in env and "HTTPS_PROXY" not in env and env["HOME"] == "/root"


def test_spmd_reads_back_what_the_launcher_writes():
    cfg = two_nodes(collective_timeout=7)
    for rank in range(cfg.world_size):
        env = worker_env(cfg, rank, {})
        endpoints, current = check_paddle_env(rank, cfg.world_size, env)
        assert endpoints == cfg.endpoints and current == cfg.endpoints[rank]
        read = flags(env)
        assert read.collective_timeout_s == 7.0
        assert read.status_file == cfg.rank_status(rank)
        assert read.worker_log == cfg.rank_log(rank)
        assert read.selected_gpus is None  # a CPU run sets no GPU


def test_job_env_threads_and_unbuffered_output():
    cfg = two_nodes()
    env = job_env(cfg, {})
    assert env["PYTHONUNBUFFERED"] == "1" and int(env["OMP_NUM_THREADS"]) >= 1
    assert "SPMD_COLLECTIVE_TIMEOUT" not in env  # the workers' own setting stands
    assert "OMP_NUM_THREADS" not in job_env(cfg, {"OMP_NUM_THREADS": "4"})


def test_worker_started_by_an_mpi_process_manager():
    env = mpi_worker_env(3, 4, {"PADDLE_TRAINER_ENDPOINTS": "stale", "https_proxy": "p"}, 9,
                         gpu=1)
    assert (env["PADDLE_TRAINER_ID"], env["PADDLE_TRAINERS_NUM"]) == ("3", "4")
    assert env["FLAGS_selected_gpus"] == "1" and env["SPMD_COLLECTIVE_TIMEOUT"] == "9"
    assert "PADDLE_TRAINER_ENDPOINTS" not in env and "https_proxy" not in env


def _sections(cmd: list[str], first_flag: str) -> list[list[str]]:
    """The per-rank sections of an MPMD command line."""
    start = cmd.index(first_flag)
    sections, current = [], []
    for arg in cmd[start:]:
        if arg == ":":
            sections.append(current)
            current = []
        else:
            current.append(arg)
    return sections + [current]


def test_hydra_command_one_node():
    cfg = LaunchConfig("train.py", ["--epochs", "3"], nproc_per_node=2, log_dir="/logs",
                       mpi=HYDRA_MPI, python="/venv/bin/python", ports=[5000, 5001])
    cmd = command(cfg, base_env={})
    assert cmd[:2] == ["/venv/bin/mpiexec", "-disable-auto-cleanup"]
    assert "-hosts" not in cmd
    assert cmd[cmd.index("PADDLE_TRAINERS_NUM") - 1] == "-genv"
    sections = _sections(cmd, "-n")
    assert len(sections) == 2
    for rank, section in enumerate(sections):
        assert section[:2] == ["-n", "1"]
        env = dict(zip(section[3:-6:3], section[4:-6:3]))
        assert all(flag == "-env" for flag in section[2:-6:3])
        assert env["PADDLE_TRAINER_ID"] == str(rank)
        assert env["PADDLE_CURRENT_ENDPOINT"] == f"127.0.0.1:{5000 + rank}"
        assert section[-6:] == ["/venv/bin/python", "-m", "spmd.run", "train.py", "--epochs",
                                "3"]


def test_hydra_command_several_nodes_with_paddle_launch_on_each():
    # the default across nodes: node 0's mpiexec lists one proxy command per node instead
    # of starting them by ssh (launch/multinode.py hands them out)
    cfg = two_nodes(mpi=HYDRA_MPI)
    cmd = command(cfg, base_env={})
    assert cmd[1:3] == ["-launcher", "manual"]
    assert cmd[cmd.index("-hosts") + 1] == "10.0.0.1:2,10.0.0.2:2"
    assert cfg.rendezvous_address == ("10.0.0.1", 6170)


def test_hydra_command_several_nodes():
    cfg = two_nodes(mpi=HYDRA_MPI, bootstrap="ssh")
    cmd = command(cfg, base_env={})
    assert "-launcher" not in cmd
    # Across nodes the process manager keeps cleanup: the launcher cannot see other machines.
    assert "-disable-auto-cleanup" not in cmd
    assert cmd[cmd.index("-hosts") + 1] == "10.0.0.1:2,10.0.0.2:2"
    sections = _sections(cmd, "-n")
    assert [s[s.index("PADDLE_TRAINER_ID") + 1] for s in sections] == ["0", "1", "2", "3"]
    assert [s[s.index("PADDLE_CURRENT_ENDPOINT") + 1] for s in sections] == cfg.endpoints


def test_open_mpi_command_several_nodes():
    cfg = two_nodes(mpi=OPEN_MPI, bootstrap="ssh")
    cmd = command(cfg, base_env={})
    assert cmd[:2] == ["/usr/bin/mpirun", "--oversubscribe"]
    assert cmd[cmd.index("--host") + 1] == "10.0.0.1:2,10.0.0.2:2"
    assert "PADDLE_TRAINERS_NUM=4" in cmd and cmd[cmd.index("PADDLE_TRAINERS_NUM=4") - 1] == "-x"
    sections = _sections(cmd, "-np")
    assert len(sections) == 4
    for rank, section in enumerate(sections):
        assert section[:3] == ["-np", "1", "env"]
        assert f"PADDLE_TRAINER_ID={rank}" in section
        program = worker_program(cfg)
        assert section[-len(program):] == program


@pytest.mark.parametrize("env, expected", [
    ({}, "local"),
    ({"SLURM_JOB_ID": "3", "SLURM_JOB_NODELIST": "vm"}, "slurm"),
    ({"SLURM_JOB_ID": "3", "SLURM_JOB_NODELIST": "vm", "PMI_RANK": "0"}, "mpi"),
    ({"OMPI_COMM_WORLD_RANK": "1"}, "mpi"),
])
def test_detect_scheduler(env, expected):
    assert sched.detect_scheduler(env) == expected


def test_slurm_host_lists():
    assert sched.expand_hostlist("vm") == ["vm"]
    assert sched.expand_hostlist("n[01-03,7],gpu[9-10],login") == [
        "n01", "n02", "n03", "n7", "gpu9", "gpu10", "login"]
    assert sched.slurm_tasks_per_node({"SLURM_TASKS_PER_NODE": "4(x2),1"}) == 4
    assert sched.slurm_tasks_per_node({}) is None


def test_mpi_rank_and_gpu_helpers():
    assert sched.mpi_rank_size({"PMI_RANK": "2", "PMI_SIZE": "4"}) == (2, 4)
    assert sched.mpi_local_rank({"MPI_LOCALRANKID": "1"}) == 1
    assert sched.visible_gpu_count({"CUDA_VISIBLE_DEVICES": "0,1"}) == 2
    assert sched.visible_gpu_count({"CUDA_VISIBLE_DEVICES": "-1"}) == 0
    ports = sched.free_ports(3)
    assert len(set(ports)) == 3 and all(0 < p < 65536 for p in ports)
