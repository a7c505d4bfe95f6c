"""Topology without launching MPI: worlds of one, PADDLE_* cross-checks, GPU choice."""
from __future__ import annotations

import subprocess
import sys

import pytest

from spmd.comm.topology import (
    Topology,
    check_paddle_env,
    detect,
    fill_paddle_env,
    launched_by_mpi,
    select_gpu,
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
