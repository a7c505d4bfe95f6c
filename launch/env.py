"""The environment contract between paddle-launch and its workers, in one place.

Every worker gets fluid's variables, which spmd reads back (spmd/flags.py, and
spmd/comm/topology.py, which checks them against MPI):

    PADDLE_TRAINER_ID         its global rank
    PADDLE_TRAINERS_NUM       the number of workers
    PADDLE_TRAINER_ENDPOINTS  ip:port of every worker, in rank order
    PADDLE_CURRENT_ENDPOINT   its own entry of that list
    FLAGS_selected_gpus       its GPU (GPU runs only)

and the launcher's own:

    SPMD_JOB_TOKEN            the job's token (the user's, else a fresh one): only this job's
                              processes get into its sockets (spmd/job_token.py)
    SPMD_WORKER_LOG           its log file (log_dir/workerlog.N)
    SPMD_STATUS_FILE          where it records start, waits, errors and its end (spmd/run.py)
    SPMD_COLLECTIVE_TIMEOUT   --collective_timeout, when given
    PYTHONUNBUFFERED=1        so a log has every line even when the worker is killed

http_proxy and https_proxy are dropped: workers talk to each other, never through a proxy.

A parameter-server job's roles (PADDLE_TRAINING_ROLE and the rest) are written here too: see
the section "parameter-server mode" below.

>>> from launch.config import LaunchConfig
>>> rank_env(LaunchConfig("t.py", nproc_per_node=2, log_dir="/l"), 1)["PADDLE_TRAINER_ID"]
'1'
"""
from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a config is only read here (its attributes); launch.config imports this
    from .config import LaunchConfig

PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")
TOKEN_ENV = "SPMD_JOB_TOKEN"  # spmd.job_token's; not imported: under an MPI process manager
# importing spmd would arm its guard in the launcher


def shared_token(*shape) -> str:
    """A job token every process of one job computes alike from what they share (`shape`):
    keeps two jobs apart, but is no secret (set SPMD_JOB_TOKEN for that)."""
    text = "\0".join(map(str, shape))
    return hashlib.sha256(text.encode()).hexdigest()


def fresh_token() -> str:
    """A random job token, for the processes one launcher starts."""
    return secrets.token_hex(16)


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


# --- parameter-server mode -------------------------------------------------------------------
#
# fluid's roles, written here and read by the worker with spmd.ps.role.read_ps_role (the one
# reader: fleet's role makers use it too). A process of a pserver job gets (as fluid 1.8's
# `python -m paddle.distributed.launch_ps` set them):
#
#     PADDLE_TRAINING_ROLE          PSERVER or TRAINER (TRAINING_ROLE too, for fleet's role maker)
#     PADDLE_PSERVERS_IP_PORT_LIST  ip:port of every pserver, in pserver order
#     PADDLE_PSERVER_IPS            their ips (with PADDLE_PORT: the seed example's older form)
#     PADDLE_TRAINERS_NUM           the number of trainers (on a pserver too)
#     PADDLE_TRAINER_ENDPOINTS      ip:port of every trainer (local launch only; unused by spmd)
#     PADDLE_TRAINER_ID             a trainer's index, 0 .. PADDLE_TRAINERS_NUM - 1
#     PADDLE_CURRENT_ENDPOINT       a pserver's own entry of PADDLE_PSERVERS_IP_PORT_LIST
#     PADDLE_PORT, POD_IP           a pserver's own port and ip
#
# Under an MPI process manager (mpiexec, srun) the ranks map to roles: the first N ranks are
# pservers 0..N-1, the others trainers 0..size-N-1 (N from --server_num, else
# PADDLE_PSERVERS_NUM). The pservers' endpoints are PADDLE_PSERVERS_IP_PORT_LIST when set (it
# must list N entries: across nodes set it), else 127.0.0.1 (POD_IP when set) at ports
# PADDLE_PORT, PADDLE_PORT + 1, ... (default 6170): one node.

PSERVER = "PSERVER"
TRAINER = "TRAINER"
PS_DEFAULT_PORT = 6170


def _listed_endpoints(env: Mapping[str, str]) -> list[str]:
    """PADDLE_PSERVERS_IP_PORT_LIST as a list (the launcher's own reading; a worker reads its
    whole role with spmd.ps.role.read_ps_role)."""
    listed = env.get("PADDLE_PSERVERS_IP_PORT_LIST", "")
    return [e.strip() for e in listed.split(",") if e.strip()]


def ps_role_env(role: str, index: int, pserver_endpoints: list[str], trainers_num: int,
                trainer_endpoints: list[str] | None = None) -> dict[str, str]:
    """fluid's variables for pserver `index` or trainer `index` of a job.

    >>> ps_role_env("TRAINER", 1, ["127.0.0.1:6170"], 2)["PADDLE_TRAINER_ID"]
    '1'
    """
    ips = [e.rsplit(":", 1)[0] for e in pserver_endpoints]
    env = {
        "PADDLE_TRAINING_ROLE": role, "TRAINING_ROLE": role,
        "PADDLE_PSERVERS_IP_PORT_LIST": ",".join(pserver_endpoints),
        "PADDLE_PSERVER_IPS": ",".join(ips),
        "PADDLE_TRAINERS_NUM": str(trainers_num),
    }
    if trainer_endpoints:
        env["PADDLE_TRAINER_ENDPOINTS"] = ",".join(trainer_endpoints)
    if role == PSERVER:
        ip, port = pserver_endpoints[index].rsplit(":", 1)
        env.update(PADDLE_CURRENT_ENDPOINT=pserver_endpoints[index], PADDLE_PORT=port,
                   POD_IP=ip)
    else:
        env["PADDLE_TRAINER_ID"] = str(index)
        if trainer_endpoints:
            env["POD_IP"] = trainer_endpoints[index].rsplit(":", 1)[0]
    return env


def ps_server_num(option: int | None, env: Mapping[str, str]) -> int:
    """N, the number of pservers of an MPI-started job: --server_num, else PADDLE_PSERVERS_NUM,
    else the length of PADDLE_PSERVERS_IP_PORT_LIST; 0: not a pserver job."""
    if option:
        return option
    if env.get("PADDLE_PSERVERS_NUM", "").isdigit():
        return int(env["PADDLE_PSERVERS_NUM"])
    if env.get("PADDLE_PSERVERS_IP_PORT_LIST") and not env.get("PADDLE_TRAINING_ROLE"):
        return len(_listed_endpoints(env))
    return 0


def _process_manager_vars() -> set[str]:
    import spmd.launcher_vars as pm

    names = set(pm.LAUNCH_VARS) | set(pm.LOCAL_RANK_VARS) | set(pm.LOCAL_SIZE_VARS)
    names |= {v for pair in pm.RANK_SIZE_VARS for v in pair if not v.startswith("SLURM_")}
    return names - {"SLURM_LOCALID"}


def ps_mpi_env(rank: int, size: int, server_num: int,
               base_env: Mapping[str, str]) -> dict[str, str]:
    """The environment of MPI rank `rank` of `size` in a pserver job of `server_num` pservers:
    ranks 0..N-1 serve, the rest train (see the top of this section). Raises ValueError."""
    if not 0 < server_num < size:
        raise ValueError(f"{server_num} pserver(s) in an MPI job of {size} process(es): at "
                         f"least one rank must serve and one train; start more processes "
                         f"or lower --server_num / PADDLE_PSERVERS_NUM")
    endpoints = _listed_endpoints(base_env)
    if endpoints and len(endpoints) != server_num:
        raise ValueError(f"PADDLE_PSERVERS_IP_PORT_LIST lists {len(endpoints)} endpoint(s) "
                         f"but the job has {server_num} pserver(s); make them agree")
    if not endpoints:
        port = base_env.get("PADDLE_PORT", str(PS_DEFAULT_PORT))
        if not port.isdigit():
            raise ValueError(f"PADDLE_PORT={port!r}: one port, the first pserver's")
        ip = base_env.get("POD_IP") or "127.0.0.1"
        endpoints = [f"{ip}:{int(port) + i}" for i in range(server_num)]
    role, index = (PSERVER, rank) if rank < server_num else (TRAINER, rank - server_num)
    env = without_proxies(base_env)
    # the role runs as this rank's child and talks gRPC, not MPI: it must not look like an MPI
    # rank (spmd would supervise it and, as it never starts MPI, stand in for it in MPI)
    for name in _process_manager_vars():
        env.pop(name, None)
    env[TOKEN_ENV] = base_env.get(TOKEN_ENV) or shared_token(
        "spmd-ps-mpi", endpoints, size, server_num,
        *(base_env.get(k, "") for k in ("SLURM_JOB_ID", "SLURM_STEP_ID")))
    for name in ("PADDLE_TRAINER_ENDPOINTS", "SPMD_STATUS_FILE", "SPMD_WORKER_LOG",
                 "PADDLE_CURRENT_ENDPOINT", "PADDLE_TRAINER_ID"):
        env.pop(name, None)
    env.update(ps_role_env(role, index, endpoints, size - server_num))
    return env
