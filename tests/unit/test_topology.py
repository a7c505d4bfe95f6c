"""Topology without launching MPI: worlds of one, PADDLE_* cross-checks, GPU choice."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from spmd.comm.topology import (
    Topology,
    check_paddle_env,
    detect,
    fill_paddle_env,
    launched_by_mpi,
    launcher_local_size,
    select_gpu,
    share_cpu_threads,
)
from spmd.errors import InvalidArgumentError


def test_plain_python_is_a_world_of_one_without_mpi():
    code = ("import sys; from spmd.comm.topology import detect; t = detect({}); "
            "print(t.rank, t.size, 'mpi4py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "1", "False"]


def test_launch_detection():
    assert not launched_by_mpi({})
    assert launched_by_mpi({"PMI_RANK": "0"})
    assert launched_by_mpi({"OMPI_COMM_WORLD_SIZE": "2"})


@pytest.mark.parametrize("launcher", [{"PMI_RANK": "1", "PMI_SIZE": "4"},
                                      {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"},
                                      {"PMI_FD": "5", "SLURM_PROCID": "1", "SLURM_NTASKS": "4"}])
def test_mpi_launch_fills_paddle_trainer_env(launcher):
    env = dict(launcher)
    assert fill_paddle_env(env)
    assert (env["PADDLE_TRAINER_ID"], env["PADDLE_TRAINERS_NUM"]) == ("1", "4")


def test_paddle_trainer_env_is_left_alone_when_set_or_not_under_mpi():
    env = {"PMI_RANK": "1", "PMI_SIZE": "4", "PADDLE_TRAINER_ID": "1"}
    assert not fill_paddle_env(env) and "PADDLE_TRAINERS_NUM" not in env
    env = {"SLURM_PROCID": "1", "SLURM_NTASKS": "4"}  # sbatch's shell, not an MPI launch
    assert not fill_paddle_env(env) and "PADDLE_TRAINER_ID" not in env


def test_trainers_without_mpi_is_a_clear_error():
    with pytest.raises(InvalidArgumentError, match="not started by an MPI launcher.*mpirun -n 4"):
        detect({"PADDLE_TRAINERS_NUM": "4"})


@pytest.mark.parametrize("env, message", [
    ({"PADDLE_TRAINERS_NUM": "3"}, "PADDLE_TRAINERS_NUM=3 but the MPI world has 2"),
    ({"PADDLE_TRAINER_ID": "0"}, "PADDLE_TRAINER_ID=0 but this process is MPI rank 1"),
    ({"PADDLE_TRAINER_ENDPOINTS": "a:1"}, "lists 1 endpoint"),
    ({"PADDLE_TRAINER_ENDPOINTS": "a:1,b:2", "PADDLE_CURRENT_ENDPOINT": "a:1"},
     "PADDLE_CURRENT_ENDPOINT=a:1 but entry 1"),
    ({"PADDLE_TRAINER_ID": "x"}, "not an integer"),
])
def test_paddle_env_disagreeing_with_mpi(env, message):
    with pytest.raises(InvalidArgumentError, match=message) as info:
        check_paddle_env(1, 2, env)
    assert "integer" in message or str(info.value).startswith("[rank 1/2]")


def test_paddle_env_agreeing():
    env = {"PADDLE_TRAINER_ID": "1", "PADDLE_TRAINERS_NUM": "2",
           "PADDLE_TRAINER_ENDPOINTS": "h:6170,h:6171", "PADDLE_CURRENT_ENDPOINT": "h:6171"}
    assert check_paddle_env(1, 2, env) == (["h:6170", "h:6171"], "h:6171")


def test_gpu_selection():
    t = Topology(rank=3, size=4, local_rank=1, local_size=2)
    assert select_gpu(t, 2, {}) == 1
    assert select_gpu(t, 4, {"FLAGS_selected_gpus": "3,2"}) == 3
    # one visible GPU: the scheduler bound it to this rank (srun --gpus-per-task=1), or all
    # ranks of the node share it
    assert select_gpu(t, 1, {"CUDA_VISIBLE_DEVICES": "1"}) == 0
    t3 = Topology(rank=2, size=4, local_rank=2, local_size=4)
    with pytest.raises(InvalidArgumentError, match=r"\[rank 2/4\] GPU 2 .*local rank 2.* 2 GPU"):
        select_gpu(t3, 2, {"CUDA_VISIBLE_DEVICES": "0,1"})
    with pytest.raises(InvalidArgumentError, match=r"GPU 1 .*FLAGS_selected_gpus=1.* 1 GPU"):
        select_gpu(t, 1, {"FLAGS_selected_gpus": "1"})
    with pytest.raises(InvalidArgumentError, match="not a list of GPU ids"):
        select_gpu(t, 2, {"FLAGS_selected_gpus": "gpu0"})


@pytest.mark.parametrize("launcher, local", [
    ({"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALNRANKS": "2"}, 2),  # MPICH's Hydra
    ({"OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, 4),  # Open MPI
    ({"PMI_FD": "5", "SLURM_STEP_TASKS_PER_NODE": "2(x3),1", "SLURM_NODEID": "3"}, 1),  # srun
    ({"PMI_FD": "5", "SLURM_STEP_TASKS_PER_NODE": "2(x3),1", "SLURM_NODEID": "1"}, 2),
    ({"PMI_RANK": "0", "PMI_SIZE": "4"}, 1),  # a launcher that does not say
    ({"MPI_LOCALNRANKS": "2"}, 1),  # not launched by MPI
])
def test_launcher_local_size(launcher, local):
    assert launcher_local_size(launcher) == local


def test_ranks_on_a_node_share_its_cores_for_blas_threads():
    env = {"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALNRANKS": "2"}
    assert share_cpu_threads(env, bound=16, total=16) == 8 and env["OMP_NUM_THREADS"] == "8"
    env = {"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALNRANKS": "4"}
    assert share_cpu_threads(env, bound=2, total=2) == 1  # oversubscribed: one thread each
    env = {"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALNRANKS": "2"}
    assert share_cpu_threads(env, bound=3, total=16) == 3  # bound by the launcher: its cores
    for user_set in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env = {"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALNRANKS": "2", user_set: "5"}
        assert share_cpu_threads(env, bound=16, total=16) is None and env.get(
            "OMP_NUM_THREADS", "5") == "5"
    env = {"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALNRANKS": "1"}  # one rank per node
    assert share_cpu_threads(env, bound=16, total=16) is None and "OMP_NUM_THREADS" not in env


def test_import_spmd_under_mpiexec_sets_each_ranks_thread_share(tmp_path):
    # each rank writes its own file: two ranks' prints may interleave on mpiexec's stdout
    code = ("import os, sys, spmd; open(os.path.join(sys.argv[1], os.environ['PMI_RANK']), "
            "'w').write(str(os.environ.get('OMP_NUM_THREADS')))")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    mpiexec = pathlib.Path(sys.executable).with_name("mpiexec")
    subprocess.run([str(mpiexec), "-n", "2", sys.executable, "-c", code, str(tmp_path)],
                   env=env, capture_output=True, text=True, timeout=120, check=True)
    bound, total = len(os.sched_getaffinity(0)), os.cpu_count()
    expected = str(bound if bound < total else max(1, total // 2))
    assert [(tmp_path / r).read_text() for r in ("0", "1")] == [expected, expected]
