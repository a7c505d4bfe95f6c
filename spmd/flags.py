"""Every FLAGS_* / PADDLE_* / SPMD_* environment variable spmd reads, typed, read in one place.

>>> flags().cpu_num >= 1
True
"""
from __future__ import annotations

import os

from .errors import InvalidArgumentError
from .record import FrozenRecord


def _read_int(env, name: str, default: int, minimum: int | None = None) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgumentError(
            f"environment variable {name}={raw!r} is not an integer; set it to e.g. {default}"
        ) from None
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(f"environment variable {name}={value} must be >= {minimum}")
    return value


def _read_float(env, name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidArgumentError(
            f"environment variable {name}={raw!r} is not a number; set it to e.g. {default}"
        ) from None


def _read_choice(env, name: str, default: str, choices: tuple) -> str:
    raw = (env.get(name) or default).strip().lower()
    if raw not in choices:
        raise InvalidArgumentError(
            f"environment variable {name}={raw!r}: expected one of {list(choices)}")
    return raw


def _read_bool(env, name: str, default: bool) -> bool:
    """fluid's spellings of a boolean flag: 1/0, true/false (any case)."""
    raw = (env.get(name) or "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise InvalidArgumentError(
        f"environment variable {name}={raw!r} is not a boolean; set it to 1 or 0")


class Flags(FrozenRecord, frozen=True):
    """Every flag spmd reads, as one `flags()` call read them (a FrozenRecord: never changed
    after it is made)."""

    __slots__ = ("cpu_num", "fuse_parameter_memory_size_mb", "selected_gpus",
                 "collective_timeout_s", "gpu_comm", "host_comm", "malloc_tune", "status_file",
                 "worker_log", "check_nan_inf", "supervise", "ps_rpc_deadline_s",
                 "ps_idle_timeout_s", "node_size", "join_timeout_s", "job_token", "env_start")
    _fields = __slots__

    cpu_num: int
    """CPU_NUM: places per process for CPU data parallelism (fluid's default: 1)."""
    fuse_parameter_memory_size_mb: float
    """FLAGS_fuse_parameter_memory_size: gradient bucket size in MB for fused all-reduce."""
    selected_gpus: str | None
    """FLAGS_selected_gpus: comma-separated GPU ids this process may use."""
    collective_timeout_s: float
    """SPMD_COLLECTIVE_TIMEOUT: seconds a collective may wait before the job is failed."""
    gpu_comm: str
    """SPMD_GPU_COMM: "nccl" (default; one rank per GPU) or "mpi" (GPU arrays staged through
    host memory; chosen anyway when more ranks than GPUs share a node)."""
    host_comm: str
    """SPMD_HOST_COMM: the backend of the world communicator for host arrays: "mpi" (default)
    or "mpi_persistent" (allreduce of a buffer reduced again and again, as gradient buckets
    are, with MPI 4 persistent requests; spmd/comm/mpi_persistent.py). A request is made on a
    buffer's second allreduce, so every rank must reduce the same buffers in turn: where ranks
    fetch different things (rank 0 alone fetching the loss, as BERT's train.py) their plans and
    buckets differ, one rank makes a request where another does a plain allreduce, and the
    job hangs until the collective timeout names it: keep "mpi" there."""
    malloc_tune: bool
    """SPMD_MALLOC_TUNE: raise glibc's mmap/trim thresholds so step temporaries are reused
    (default on; 0 turns it off). See spmd/executor/allocator.py."""
    status_file: str | None
    """SPMD_STATUS_FILE: where a worker started by paddle-launch records its life (start, the
    collective it waits in, its error, how it ended) for the launcher; see spmd/run.py."""
    worker_log: str | None
    """SPMD_WORKER_LOG: the file a worker started by paddle-launch writes its output to."""
    check_nan_inf: bool
    """FLAGS_check_nan_inf: check every op's outputs and the feeds for NaN/Inf (fluid's flag;
    off by default)."""
    supervise: bool
    """SPMD_SUPERVISE: under an MPI launcher with more than one rank, `import spmd` runs the
    script under a small supervisor process and a peer-liveness channel, so a rank that ends
    early (even by os._exit or a signal) fails the job within seconds (default on; 0 turns it
    off). See spmd/guard/."""
    ps_rpc_deadline_s: float
    """SPMD_PS_RPC_DEADLINE: seconds one parameter-server call (with its retries while a
    pserver starts, and its waits at a barrier) may take before it fails (fluid's
    FLAGS_rpc_deadline, 180 s). See spmd/ps/rpc.py."""
    ps_idle_timeout_s: float
    """SPMD_PS_IDLE_TIMEOUT: seconds a pserver serves without any call from its trainers
    before it fails, naming the trainers that never called Executor.close() (spmd/ps/pserver.py;
    fluid's pserver waits forever)."""
    node_size: int
    """SPMD_NODE_SIZE: processes per node for BuildStrategy.use_hierarchical_allreduce when
    hierarchical_allreduce_inter_nranks is 0: consecutive ranks form a node (0, the default:
    MPI's shared-memory nodes, MPI_COMM_TYPE_SHARED). Set it to simulate nodes on one machine
    (`SPMD_NODE_SIZE=2 mpiexec -n 4`: 2 nodes of 2). See spmd/comm/hierarchy.py."""
    join_timeout_s: float
    """SPMD_JOIN_TIMEOUT: seconds trainers started with PADDLE_* variables only (no MPI
    launcher) wait for each other at trainer 0's endpoint before the job fails, naming the
    trainers that never came. See spmd/comm/join.py; SPMD_JOB_TOKEN is the secret they share."""
    job_token: str | None
    """SPMD_JOB_TOKEN: the secret every trainer of an env-only job gets; trainer 0's join
    point admits only hellos made with it (spmd/comm/join_point.py)."""
    env_start: bool
    """SPMD_ENV_START: trainers with PADDLE_* variables only and no MPI launcher join one world
    (default on; 0 refuses them as before)."""

    def __init__(self, cpu_num: int, fuse_parameter_memory_size_mb: float,
                 selected_gpus: str | None, collective_timeout_s: float, gpu_comm: str,
                 host_comm: str, malloc_tune: bool, status_file: str | None = None,
                 worker_log: str | None = None, check_nan_inf: bool = False,
                 supervise: bool = True, ps_rpc_deadline_s: float = 180.0,
                 ps_idle_timeout_s: float = 1800.0, node_size: int = 0,
                 join_timeout_s: float = 300.0, job_token: str | None = None,
                 env_start: bool = True):
        set_ = object.__setattr__  # frozen: see spmd/record.py
        set_(self, "cpu_num", cpu_num)
        set_(self, "fuse_parameter_memory_size_mb", fuse_parameter_memory_size_mb)
        set_(self, "selected_gpus", selected_gpus)
        set_(self, "collective_timeout_s", collective_timeout_s)
        set_(self, "gpu_comm", gpu_comm)
        set_(self, "host_comm", host_comm)
        set_(self, "malloc_tune", malloc_tune)
        set_(self, "status_file", status_file)
        set_(self, "worker_log", worker_log)
        set_(self, "check_nan_inf", check_nan_inf)
        set_(self, "supervise", supervise)
        set_(self, "ps_rpc_deadline_s", ps_rpc_deadline_s)
        set_(self, "ps_idle_timeout_s", ps_idle_timeout_s)
        set_(self, "node_size", node_size)
        set_(self, "join_timeout_s", join_timeout_s)
        set_(self, "job_token", job_token)
        set_(self, "env_start", env_start)


_revision = 0  # raised by fluid.set_flags; compiled plans remember the one they were built at


def revision() -> int:
    """How many times fluid.set_flags changed a flag spmd acts on in this process. A plan
    built at another revision is rebuilt before it runs, so a flag set in code applies from the
    next run on; comparing this counter is all that costs per run (reading the flags is not
    free).

    >>> revision() >= 0
    True
    """
    return _revision


def note_changed() -> None:
    """Called by fluid.set_flags after it wrote a flag spmd acts on."""
    global _revision
    _revision += 1


def flags(env=None) -> Flags:
    """Read the flags from `env` (default os.environ). Cheap; call it where the value is used."""
    env = os.environ if env is None else env
    return Flags(
        cpu_num=_read_int(env, "CPU_NUM", 1, minimum=1),
        fuse_parameter_memory_size_mb=_read_float(env, "FLAGS_fuse_parameter_memory_size", 32.0),
        selected_gpus=env.get("FLAGS_selected_gpus") or None,
        collective_timeout_s=_read_float(env, "SPMD_COLLECTIVE_TIMEOUT", 1800.0),
        gpu_comm=_read_choice(env, "SPMD_GPU_COMM", "nccl", ("nccl", "mpi")),
        host_comm=_read_choice(env, "SPMD_HOST_COMM", "mpi", ("mpi", "mpi_persistent")),
        malloc_tune=_read_int(env, "SPMD_MALLOC_TUNE", 1, minimum=0) != 0,
        status_file=env.get("SPMD_STATUS_FILE") or None,
        worker_log=env.get("SPMD_WORKER_LOG") or None,
        check_nan_inf=_read_bool(env, "FLAGS_check_nan_inf", False),
        supervise=_read_int(env, "SPMD_SUPERVISE", 1, minimum=0) != 0,
        ps_rpc_deadline_s=_read_float(env, "SPMD_PS_RPC_DEADLINE", 180.0),
        ps_idle_timeout_s=_read_float(env, "SPMD_PS_IDLE_TIMEOUT", 1800.0),
        node_size=_read_int(env, "SPMD_NODE_SIZE", 0, minimum=0),
        join_timeout_s=_read_float(env, "SPMD_JOIN_TIMEOUT", 300.0),
        job_token=env.get("SPMD_JOB_TOKEN") or None,
        env_start=_read_bool(env, "SPMD_ENV_START", True),
    )
