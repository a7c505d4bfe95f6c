"""The environment contract between paddle-launch and its workers, in one place.

Every worker gets fluid's variables, which spmd reads back (spmd/flags.py, and
spmd/comm/topology.py, which checks them against MPI):

    PADDLE_TRAINER_ID         its global rank
    PADDLE_TRAINERS_NUM       the number of workers
    PADDLE_TRAINER_ENDPOINTS  ip:port of every worker, in rank order
    PADDLE_CURRENT_ENDPOINT   its own entry of that list
    FLAGS_selected_gpus       its GPU (GPU runs only)

and the launcher's own:

    SPMD_WORKER_LOG           its log file (log_dir/workerlog.N)
    SPMD_STATUS_FILE          where it records start, waits, errors and its end (spmd/run.py)
    SPMD_COLLECTIVE_TIMEOUT   --collective_timeout, when given
    PYTHONUNBUFFERED=1        so a log has every line even when the worker is killed

http_proxy and https_proxy are dropped: workers talk to each other, never through a proxy.

>>> from launch.config import LaunchConfig
>>> rank_env(LaunchConfig("t.py", nproc_per_node=2, log_dir="/l"), 1)["PADDLE_TRAINER_ID"]
'1'
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from .config import LaunchConfig

PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")


# set by spmd.guard in a supervised program: a worker inheriting it would go unsupervised
_NOT_INHERITED = (*PROXY_VARS, "SPMD_SUPERVISED")


def without_proxies(env: Mapping[str, str]) -> dict[str, str]:
    """`env` minus the proxy variables (and spmd's mark of a supervised process)."""
    return {k: v for k, v in env.items() if k not in _NOT_INHERITED}


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def job_env(config: LaunchConfig, base_env: Mapping[str, str]) -> dict[str, str]:
    """Variables every worker gets."""
    env = {
        "PADDLE_TRAINERS_NUM": str(config.world_size),
        "PADDLE_TRAINER_ENDPOINTS": ",".join(config.endpoints),
        "PYTHONUNBUFFERED": "1",
    }
    if config.collective_timeout is not None:
        env["SPMD_COLLECTIVE_TIMEOUT"] = f"{config.collective_timeout:g}"
    if "OMP_NUM_THREADS" not in base_env and config.nproc_per_node > 1:
        # N workers each starting a thread per core would oversubscribe the machine N times.
        env["OMP_NUM_THREADS"] = str(max(1, _cpus() // config.nproc_per_node))
    return env


def rank_env(config: LaunchConfig, rank: int) -> dict[str, str]:
    """Variables that differ between workers: those of global rank `rank`."""
    env = {
        "PADDLE_TRAINER_ID": str(rank),
        "PADDLE_CURRENT_ENDPOINT": config.endpoints[rank],
        "SPMD_WORKER_LOG": config.rank_log(rank),
        "SPMD_STATUS_FILE": config.rank_status(rank),
    }
    if config.selected_gpus:
        env["FLAGS_selected_gpus"] = str(config.selected_gpus[rank % config.nproc_per_node])
    return env


def worker_env(config: LaunchConfig, rank: int, base_env: Mapping[str, str]) -> dict[str, str]:
    """The whole environment worker `rank` sees."""
    return {**without_proxies(base_env), **job_env(config, base_env), **rank_env(config, rank)}


def mpi_worker_env(rank: int, size: int, base_env: Mapping[str, str],
                   collective_timeout: float | None, gpu: int | None = None) -> dict[str, str]:
    """The environment of a launcher that an MPI process manager started and that becomes
    worker `rank` itself: the world is the process manager's, so no endpoints, no logs."""
    env = without_proxies(base_env)
    env.update(PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM=str(size))
    if gpu is not None:
        env["FLAGS_selected_gpus"] = str(gpu)
    for name in ("PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT", "SPMD_STATUS_FILE",
                 "SPMD_WORKER_LOG"):
        env.pop(name, None)
    if collective_timeout is not None:
        env["SPMD_COLLECTIVE_TIMEOUT"] = f"{collective_timeout:g}"
    return env
