"""The variables MPI process managers set in the processes they start, read in one place and
without loading MPI: MPICH/Hydra and srun's PMI/PMI-2 (PMI_RANK, PMI_SIZE, MPI_LOCALNRANKS,
PMI_HOSTNAME), Open MPI (OMPI_COMM_WORLD_*), PMIx (PMIX_*), MVAPICH (MV2_COMM_WORLD_*),
SLURM's own (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_TASKS_PER_NODE, SLURMD_NODENAME);
and which libmpi this process mapped.

The one table: paddle-launch (launch/scheduler.py, launch/env.py, launch/mpi.py) and spmd
(spmd/comm/topology.py, spmd/comm/mpi.py, spmd/guard/channel.py) read them through here. It
imports nothing of spmd and does nothing when imported (launch may import it: test_imports),
so a launcher reads the same names a worker does.

>>> rank_size({"PMI_RANK": "3", "PMI_SIZE": "4"})
(3, 4)
>>> tasks_per_node("2(x3),1")
[2, 2, 2, 1]
"""
from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["LAUNCH_VARS", "LOCAL_RANK_VARS", "LOCAL_SIZE_VARS", "NODE_NAME_VARS",
           "RANK_SIZE_VARS", "in_srun_step", "launched_by_mpi", "loaded_libmpi", "local_rank",
           "local_size", "node_names", "one_node", "rank_size", "slurm_tasks_on_node",
           "started_by_hydra", "tasks_per_node", "world_size"]

# Set in every process a process manager starts (presence alone says "started by MPI").
LAUNCH_VARS = ("PMI_RANK", "PMI_SIZE", "PMI_FD", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
               "PMIX_RANK", "MV2_COMM_WORLD_SIZE", "HYDI_CONTROL_FD")
# (rank, size) pairs, in the order they are trusted; SLURM's last (srun without an MPI plugin)
RANK_SIZE_VARS = (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                  ("PMIX_RANK", "PMIX_SIZE"), ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"),
                  ("SLURM_PROCID", "SLURM_NTASKS"))
LOCAL_RANK_VARS = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                   "PMIX_LOCAL_RANK", "SLURM_LOCALID")
LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE",
                   "PMIX_LOCAL_SIZE")
# this node's name (or address) as the process manager knows it: Hydra's entry of its host
# list, PMIx's host name, the SLURM node this task runs on
NODE_NAME_VARS = ("PMI_HOSTNAME", "PMIX_HOSTNAME", "SLURMD_NODENAME")


def launched_by_mpi(env: Mapping[str, str]) -> bool:
    """Whether a process manager started this process (srun without an MPI plugin is not
    one: see in_srun_step)."""
    return any(v in env for v in LAUNCH_VARS)


def rank_size(env: Mapping[str, str]) -> tuple[int, int] | None:
    """(rank, size) the process manager gave, or None when it names neither."""
    for rank_var, size_var in RANK_SIZE_VARS:
        rank, size = env.get(rank_var, ""), env.get(size_var, "")
        if rank.isdigit() and size.isdigit():
            return int(rank), int(size)
    return None


def local_rank(env: Mapping[str, str]) -> int | None:
    """This process's rank among those of its node, when the process manager says it."""
    for name in LOCAL_RANK_VARS:
        if env.get(name, "").isdigit():
            return int(env[name])
    return None


def tasks_per_node(spec: str) -> list[int] | None:
    """SLURM's compressed task counts (`2(x3),1`: 2 tasks on each of three nodes, then 1) as
    one count per node; None when `spec` is not one."""
    counts: list[int] = []
    for part in spec.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if match is None:
            return None
        counts += [int(match[1])] * int(match[2] or 1)
    return counts or None


def slurm_tasks_on_node(env: Mapping[str, str]) -> int | None:
    """This node's task count: srun's SLURM_STEP_TASKS_PER_NODE (else the allocation's
    SLURM_TASKS_PER_NODE) at SLURM_NODEID."""
    spec = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "")
    node = env.get("SLURM_NODEID", "")
    counts = tasks_per_node(spec) if spec else None
    if counts is None or not node.isdigit() or int(node) >= len(counts):
        return None
    return counts[int(node)]


def local_size(env: Mapping[str, str]) -> int | None:
    """How many ranks the process manager started on this node, when it says it."""
    for name in LOCAL_SIZE_VARS:
        if env.get(name, "").isdigit():
            return max(1, int(env[name]))
    return slurm_tasks_on_node(env)


def in_srun_step(env: Mapping[str, str]) -> bool:
    """Whether this process is one task of an `srun` step (each task then is a rank, even
    without an MPI plugin: SLURM_PROCID of SLURM_STEP_NUM_TASKS)."""
    return bool(env.get("SLURM_JOB_ID") and env.get("SLURM_PROCID", "").isdigit()
                and env.get("SLURM_STEP_ID", "").isdigit() and "SLURM_STEP_NUM_TASKS" in env)


def one_node(env: Mapping[str, str]) -> bool:
    """Whether the process manager says every rank of the job runs on this node (its count of
    this node's ranks equals the world's); False when it does not say."""
    here = local_size(env)
    return here is not None and here == world_size(env)


def started_by_hydra(env: Mapping[str, str]) -> bool:
    """Whether MPICH's process manager (Hydra: mpiexec, paddle-launch's workers) started this
    process: it alone sets MPI_LOCALNRANKS."""
    return "MPI_LOCALNRANKS" in env


def world_size(env: Mapping[str, str]) -> int | None:
    """How many ranks the job has, when the process manager says it."""
    for _, size_var in RANK_SIZE_VARS:
        if env.get(size_var, "").isdigit():
            return int(env[size_var])
    return None


def node_names(env: Mapping[str, str]) -> list[str]:
    """This node's names as the process manager gave them (NODE_NAME_VARS), in that order."""
    return [env[name] for name in NODE_NAME_VARS if env.get(name)]


def loaded_libmpi() -> str | None:
    """Path of the libmpi this process has mapped (Linux): paddle-launch finds that MPI's own
    bin/ from it, and spmd calls its MPI_Init_thread through ctypes (a bounded start)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "/libmpi" in path and path.startswith("/"):
                    return path
    except OSError:
        pass
    return None
