"""Who this process is: world rank and size, local rank, PADDLE_* endpoints, and its GPU.

Launched by mpiexec / mpirun / srun, the world comes from mpi4py's COMM_WORLD and the local rank
from Split_type(COMM_TYPE_SHARED). The PADDLE_* variables, when set, must agree with MPI. A plain
`python train.py` is a world of one and never loads an MPI library.
"""
from __future__ import annotations

import os

from .. import launcher_vars as pm  # the process managers' variables: one table, launch's too
from ..errors import InvalidArgumentError
from ..record import FrozenRecord


def launched_by_mpi(env=None) -> bool:
    """Whether an MPI process manager started this process (spmd/launcher_vars.py)."""
    return pm.launched_by_mpi(os.environ if env is None else env)


class Topology(FrozenRecord, frozen=True):
    """This process's place in the job (`detect()`); never changed after it is made."""

    __slots__ = ("rank", "size", "local_rank", "local_size", "endpoints", "current_endpoint",
                 "uses_mpi")
    _fields = __slots__

    def __init__(self, rank: int = 0, size: int = 1, local_rank: int = 0, local_size: int = 1,
                 endpoints: list | None = None, current_endpoint: str | None = None,
                 uses_mpi: bool = False):
        set_ = object.__setattr__  # frozen: see spmd/record.py
        set_(self, "rank", rank)
        set_(self, "size", size)
        set_(self, "local_rank", local_rank)
        set_(self, "local_size", local_size)
        set_(self, "endpoints", [] if endpoints is None else endpoints)
        set_(self, "current_endpoint", current_endpoint)
        set_(self, "uses_mpi", uses_mpi)

    def tag(self) -> str:
        """`[rank r/n]`, the prefix of every multi-process error message."""
        return f"[rank {self.rank}/{self.size}]"


def _paddle_env(env):
    def as_int(name):
        raw = env.get(name)
        if raw in (None, ""):
            return None
        try:
            return int(raw)
        except ValueError:
            raise InvalidArgumentError(f"{name}={raw!r} is not an integer") from None

    endpoints = [e for e in env.get("PADDLE_TRAINER_ENDPOINTS", "").split(",") if e]
    return (as_int("PADDLE_TRAINER_ID"), as_int("PADDLE_TRAINERS_NUM"), endpoints,
            env.get("PADDLE_CURRENT_ENDPOINT") or None)


def check_paddle_env(rank: int, size: int, env) -> tuple[list, str | None]:
    """Cross-check PADDLE_* against the MPI world; return (endpoints, current endpoint)."""
    trainer_id, trainers_num, endpoints, current = _paddle_env(env)
    tag = f"[rank {rank}/{size}]"
    fix = ("unset the PADDLE_* variables to let MPI decide, or launch with as many processes "
           "as PADDLE_TRAINERS_NUM says (paddle-launch sets them consistently)")
    if trainers_num is not None and trainers_num != size:
        raise InvalidArgumentError(
            f"{tag} PADDLE_TRAINERS_NUM={trainers_num} but the MPI world has {size} "
            f"process(es); {fix}")
    if trainer_id is not None and trainer_id != rank:
        raise InvalidArgumentError(
            f"{tag} PADDLE_TRAINER_ID={trainer_id} but this process is MPI rank {rank}; {fix}")
    if endpoints and len(endpoints) != size:
        raise InvalidArgumentError(
            f"{tag} PADDLE_TRAINER_ENDPOINTS lists {len(endpoints)} endpoint(s) but the MPI "
            f"world has {size} process(es); {fix}")
    if endpoints and current is not None and endpoints[rank] != current:
        raise InvalidArgumentError(
            f"{tag} PADDLE_CURRENT_ENDPOINT={current} but entry {rank} of "
            f"PADDLE_TRAINER_ENDPOINTS is {endpoints[rank]}; {fix}")
    return endpoints, current


def launcher_rank_size(env=None) -> tuple[int, int]:
    """(rank, size) from the process manager's variables, without loading MPI; (0, 1) when no
    MPI launcher started this process."""
    env = os.environ if env is None else env
    if not launched_by_mpi(env):
        return 0, 1
    if env.get("SPMD_JOIN_START") == "1":  # its own mpiexec -n 1: the trainer id decides
        ids = _paddle_env(env)
        return ids[0], ids[1]
    return pm.rank_size(env) or (0, 1)


def fill_paddle_env(env=None) -> bool:
    """Under an MPI launcher (mpirun / mpiexec / srun) that left PADDLE_TRAINER_ID and
    PADDLE_TRAINERS_NUM unset, set them from the launcher's own rank and size variables, so a
    fluid program that picks its data shard with `os.getenv("PADDLE_TRAINER_ID")` (as fluid's
    launch sets it) does so under a plain `mpirun -n 4 python train.py` too. Values already set
    are left alone (detect() checks them against MPI). Returns whether it set them."""
    env = os.environ if env is None else env
    if not launched_by_mpi(env) or "PADDLE_TRAINER_ID" in env or "PADDLE_TRAINERS_NUM" in env:
        return False
    found = pm.rank_size(env)
    if found is None:
        return False  # a launcher that names neither: detect() asks MPI
    env["PADDLE_TRAINER_ID"], env["PADDLE_TRAINERS_NUM"] = str(found[0]), str(found[1])
    return True


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def launcher_local_size(env=None) -> int:
    """How many ranks the MPI launcher started on this node, from its variables, without
    loading MPI; 1 when not launched by MPI or when the launcher does not say."""
    env = os.environ if env is None else env
    if not launched_by_mpi(env):
        return 1
    return pm.local_size(env) or 1


def share_cpu_threads(env=None, bound: int | None = None, total: int | None = None) -> int | None:
    """Under an MPI launcher that starts several ranks on a node, give each rank its share of
    the node's cores for BLAS and OpenMP (oneDNN) threads: OMP_NUM_THREADS = cores // ranks on
    the node, as paddle-launch does (torchrun sets 1). Without it every rank starts a thread per
    core and N ranks oversubscribe the node N times. A launcher that bound the rank to fewer
    cores than the machine has (Open MPI's --bind-to, srun --cpu-bind) already sized its share:
    it gets one thread per bound core. Left alone when any of the thread variables is set.
    Takes effect for the libraries loaded after it: `import spmd` before numpy. Returns the
    count set, or None. `bound` and `total` (the cores this process may run on and the
    machine's) default to the process's affinity and os.cpu_count()."""
    env = os.environ if env is None else env
    if any(var in env for var in _THREAD_VARS):
        return None
    local = launcher_local_size(env)
    if local <= 1:
        return None
    total = total or os.cpu_count() or 1
    if bound is None:
        try:
            bound = len(os.sched_getaffinity(0))
        except AttributeError:
            bound = total
    threads = bound if bound < total else max(1, total // local)
    env["OMP_NUM_THREADS"] = str(threads)
    return threads


_detected: Topology | None = None


def detect(env=None) -> Topology:
    """The topology of this process, from MPI when launched by an MPI process manager.

    Asking MPI is a collective (Split_type), so the answer for the process's own environment is
    kept: every later call returns it without communicating."""
    global _detected
    if env is None:
        if _detected is None:
            _detected = _detect(os.environ)
        return _detected
    return _detect(env)


def _detect(env) -> Topology:
    if not launched_by_mpi(env):
        trainer_id, trainers_num, endpoints, current = _paddle_env(env)
        if (trainers_num or 1) > 1:
            raise InvalidArgumentError(
                f"PADDLE_TRAINERS_NUM={trainers_num} but this process was not started by an MPI "
                f"launcher, and it cannot join the others without one: it needs "
                f"PADDLE_TRAINER_ID, PADDLE_TRAINER_ENDPOINTS ({trainers_num} host:port) and "
                f"PADDLE_CURRENT_ENDPOINT too (and SPMD_ENV_START not 0) to join them at "
                f"trainer 0's endpoint; or run `mpirun -n {trainers_num} python train.py` or "
                f"`paddle-launch --nproc_per_node {trainers_num} train.py`")
        return Topology(endpoints=endpoints, current_endpoint=current)
    from .mpi import world

    comm = world()
    rank, size = comm.Get_rank(), comm.Get_size()
    local_rank, local_size = _node_rank_size(comm, env)
    endpoints, current = check_paddle_env(rank, size, env)
    return Topology(rank, size, local_rank, local_size, endpoints, current, uses_mpi=True)


def _node_rank_size(comm, env) -> tuple[int, int]:
    """This rank's place among the ranks of its node: MPI's shared-memory split, or, for
    trainers joined without a launcher (whose worlds MPI does not see as one node), the
    ranks of the same host name."""
    rank = comm.Get_rank()
    if env.get("SPMD_JOIN_START") != "1":
        from mpi4py import MPI

        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
        local = node.Get_rank(), node.Get_size()
        node.Free()
        return local
    import socket

    from .arrivals import same_host_ranks

    hosts = same_host_ranks(comm, socket.gethostname())
    return hosts.index(rank), len(hosts)


def select_gpu(topology: Topology, device_count: int, env=None) -> int:
    """The GPU this process uses: FLAGS_selected_gpus' first id, else the only visible GPU,
    else the local rank.

    Ids are in CUDA_VISIBLE_DEVICES numbering, as CUDA sees them."""
    env = os.environ if env is None else env
    selected = env.get("FLAGS_selected_gpus")
    if selected:
        try:
            gpu = int(selected.split(",")[0])
        except ValueError:
            raise InvalidArgumentError(
                f"{topology.tag()} FLAGS_selected_gpus={selected!r} is not a list of GPU ids"
            ) from None
        source = f"FLAGS_selected_gpus={selected}"
    elif device_count == 1:
        # the one GPU this process sees: bound to it by the scheduler (srun --gpus-per-task=1,
        # a per-rank CUDA_VISIBLE_DEVICES), or shared by every rank of the node
        gpu, source = 0, "the only visible GPU"
    else:
        gpu, source = topology.local_rank, f"local rank {topology.local_rank}"
    if not 0 <= gpu < device_count:
        visible = env.get("CUDA_VISIBLE_DEVICES")
        raise InvalidArgumentError(
            f"{topology.tag()} GPU {gpu} (from {source}) does not exist: {device_count} GPU(s) "
            f"visible" + (f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else "")
            + "; start at most one process per GPU or set FLAGS_selected_gpus")
    return gpu


def same_key_on_a_node(comm, key: str, force: bool = False) -> bool:
    """Whether two ranks of one node passed the same `key` (say, their GPU's PCI bus id), on
    any node, or any rank passed `force`: one answer for the whole job. Collective over the
    mpi4py communicator `comm`."""
    import numpy as np
    from mpi4py import MPI

    width = 64
    mine = np.zeros(width, dtype=np.uint8)
    raw = key.encode()[:width]
    mine[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    keys = np.empty((node.Get_size(), width), dtype=np.uint8)
    node.Allgather(mine, keys)
    node.Free()
    here = np.array([force or len({row.tobytes() for row in keys}) < len(keys)],
                    dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, here, op=MPI.MAX)
    return bool(here[0])
