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

A parameter-server job's roles (PADDLE_TRAINING_ROLE and the rest) are written and read here
too: see the section "parameter-server mode" below.

>>> from launch.config import LaunchConfig
>>> rank_env(LaunchConfig("t.py", nproc_per_node=2, log_dir="/l"), 1)["PADDLE_TRAINER_ID"]
'1'
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

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


# --- parameter-server mode -------------------------------------------------------------------
#
# fluid's roles, read and written only here. A process of a pserver job gets (as fluid 1.8's
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


@dataclass(frozen=True)
class PSRole:
    """This process's part in a parameter-server job, as the PADDLE_* variables say."""

    role: str
    """PSERVER or TRAINER."""
    pserver_endpoints: tuple
    trainers_num: int
    trainer_id: int
    """A trainer's index (0 on a pserver)."""
    current_endpoint: str | None
    """A pserver's own endpoint (None on a trainer)."""

    @property
    def index(self) -> int:
        """The rank within its role: pserver i, or trainer i."""
        if self.role == PSERVER:
            return self.pserver_endpoints.index(self.current_endpoint)
        return self.trainer_id


def _pserver_endpoints(env: Mapping[str, str]) -> list[str]:
    listed = env.get("PADDLE_PSERVERS_IP_PORT_LIST") or env.get("PADDLE_PSERVER_ENDPOINTS")
    if listed:
        return [e.strip() for e in listed.split(",") if e.strip()]
    ips = env.get("PADDLE_PSERVER_IPS") or env.get("PADDLE_PSERVERS")
    if not ips:
        return []
    ips_list = [ip.strip() for ip in ips.split(",") if ip.strip()]
    ports = [p.strip() for p in env.get("PADDLE_PORT", str(PS_DEFAULT_PORT)).split(",")]
    if len(ports) == 1:
        ports *= len(ips_list)
    if len(ports) != len(ips_list):
        raise ValueError(f"PADDLE_PSERVER_IPS lists {len(ips_list)} ip(s) but PADDLE_PORT "
                         f"{len(ports)} port(s); give one port, or one per ip, or set "
                         f"PADDLE_PSERVERS_IP_PORT_LIST=ip:port,...")
    return [f"{ip}:{port}" for ip, port in zip(ips_list, ports)]


def read_ps_role(env: Mapping[str, str] | None = None) -> PSRole | None:
    """This process's role from fluid's variables; None when PADDLE_TRAINING_ROLE (or
    TRAINING_ROLE) is unset. Raises ValueError naming the variable to fix.

    >>> r = read_ps_role({"PADDLE_TRAINING_ROLE": "PSERVER", "PADDLE_PSERVER_IPS": "10.0.0.1",
    ...                   "PADDLE_PORT": "6174", "POD_IP": "10.0.0.1", "PADDLE_TRAINERS_NUM": "2"})
    >>> r.role, r.current_endpoint, r.index
    ('PSERVER', '10.0.0.1:6174', 0)
    """
    env = os.environ if env is None else env
    role = (env.get("PADDLE_TRAINING_ROLE") or env.get("TRAINING_ROLE") or "").strip().upper()
    if not role:
        return None
    if role not in (PSERVER, TRAINER):
        raise ValueError(f"PADDLE_TRAINING_ROLE={role!r}: expected PSERVER or TRAINER")
    endpoints = _pserver_endpoints(env)
    if not endpoints:
        raise ValueError("PADDLE_TRAINING_ROLE is set but no pserver is named: set "
                         "PADDLE_PSERVERS_IP_PORT_LIST=ip:port,... (or PADDLE_PSERVER_IPS and "
                         "PADDLE_PORT)")
    try:
        trainers = int(env.get("PADDLE_TRAINERS_NUM", "1"))
        trainer_id = int(env.get("PADDLE_TRAINER_ID", "0")) if role == TRAINER else 0
    except ValueError as e:
        raise ValueError(f"PADDLE_TRAINERS_NUM / PADDLE_TRAINER_ID must be integers ({e})") \
            from None
    if trainers < 1 or not 0 <= trainer_id < trainers:
        raise ValueError(f"PADDLE_TRAINER_ID={trainer_id} must be in 0..PADDLE_TRAINERS_NUM-1 "
                         f"(PADDLE_TRAINERS_NUM={trainers})")
    current = None
    if role == PSERVER:
        current = env.get("PADDLE_CURRENT_ENDPOINT")
        if not current and env.get("POD_IP") and env.get("PADDLE_PORT", "").isdigit():
            current = f"{env['POD_IP']}:{env['PADDLE_PORT']}"
        if current not in endpoints:
            raise ValueError(f"this pserver's endpoint {current!r} (PADDLE_CURRENT_ENDPOINT, or "
                             f"POD_IP:PADDLE_PORT) is not in the pservers' list "
                             f"{','.join(endpoints)}")
    return PSRole(role, tuple(endpoints), trainers, trainer_id, current)


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
        return len(_pserver_endpoints(env))
    return 0


def ps_mpi_env(rank: int, size: int, server_num: int,
               base_env: Mapping[str, str]) -> dict[str, str]:
    """The environment of MPI rank `rank` of `size` in a pserver job of `server_num` pservers:
    ranks 0..N-1 serve, the rest train (see the top of this section). Raises ValueError."""
    if not 0 < server_num < size:
        raise ValueError(f"{server_num} pserver(s) in an MPI job of {size} process(es): at "
                         f"least one rank must serve and one train; start more processes "
                         f"or lower --server_num / PADDLE_PSERVERS_NUM")
    endpoints = _pserver_endpoints({k: v for k, v in base_env.items()
                                    if k == "PADDLE_PSERVERS_IP_PORT_LIST"})
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
    for name in ("PADDLE_TRAINER_ENDPOINTS", "SPMD_STATUS_FILE", "SPMD_WORKER_LOG",
                 "PADDLE_CURRENT_ENDPOINT", "PADDLE_TRAINER_ID"):
        env.pop(name, None)
    env.update(ps_role_env(role, index, endpoints, size - server_num))
    return env
