"""Where paddle-launch runs: the scheduler (an MPI process manager, a SLURM allocation, or
nothing; each registers itself with register_scheduler; their variables are read in
spmd/launcher_vars.py, the table spmd reads too), and the facts about this machine a launch
needs: its addresses, its GPUs, free ports.

>>> detect_scheduler({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]"})
'slurm'
>>> expand_hostlist("n[01-02,5],login")
['n01', 'n02', 'n5', 'login']
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping

import spmd.launcher_vars as pm

LOCAL = "local"
SLURM = "slurm"
MPI = "mpi"

_SCHEDULERS: list = []  # (priority, name, detects(env)), lowest priority first


def register_scheduler(name: str, priority: int):
    """Decorator: `detects(env) -> bool` says this scheduler runs paddle-launch; the one of
    lowest `priority` that detects wins (nothing detected: LOCAL)."""
    def register(detects):
        _SCHEDULERS.append((priority, name, detects))
        _SCHEDULERS.sort(key=lambda entry: entry[0])
        return detects

    return register


@register_scheduler(MPI, priority=0)
def _started_by_mpi(env: Mapping[str, str]) -> bool:
    """An MPI process manager started this process: the launcher becomes the worker."""
    return pm.launched_by_mpi(env)


@register_scheduler(SLURM, priority=10)
def _inside_slurm(env: Mapping[str, str]) -> bool:
    """A SLURM allocation: its nodes and tasks per node shape the job."""
    return bool(env.get("SLURM_JOB_ID") and env.get("SLURM_JOB_NODELIST"))


def detect_scheduler(env: Mapping[str, str]) -> str:
    """'mpi' when this process was started by an MPI process manager (the launcher then becomes
    the worker itself), 'slurm' inside a SLURM allocation, else 'local' (the registered
    schedulers, in priority order)."""
    return next((name for _, name, detects in _SCHEDULERS if detects(env)), LOCAL)


def mpi_rank_size(env: Mapping[str, str]) -> tuple[int, int]:
    """(rank, size) given by the process manager that started this process."""
    found = pm.rank_size(env)
    if found is not None:
        return found
    size = env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS", "1")
    return int(env.get("SLURM_PROCID", "0")), int(size)


in_srun_step = pm.in_srun_step
mpi_local_rank = pm.local_rank


def expand_hostlist(hostlist: str) -> list[str]:
    """SLURM's compressed host list (`node[01-03,7],gpu[1-2]`) as host names, in order."""
    hosts: list[str] = []
    for prefix, ranges, _suffix in re.findall(r"([^,\[\]]+)(?:\[([^\]]*)\])?(,|$)", hostlist):
        if not ranges:
            hosts.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not hi:
                hosts.append(prefix + lo)
                continue
            width = len(lo) if lo.startswith("0") else 0
            hosts.extend(f"{prefix}{i:0{width}d}" for i in range(int(lo), int(hi) + 1))
    return hosts


def slurm_tasks_per_node(env: Mapping[str, str]) -> int | None:
    """Tasks per node of the allocation: SLURM_NTASKS_PER_NODE, else the first count of
    SLURM_TASKS_PER_NODE (`2(x3),1`), else None."""
    if env.get("SLURM_NTASKS_PER_NODE", "").isdigit():
        return int(env["SLURM_NTASKS_PER_NODE"])
    counts = pm.tasks_per_node(env.get("SLURM_TASKS_PER_NODE", ""))
    return counts[0] if counts else None


def local_addresses() -> set[str]:
    """Names and IP addresses that mean this machine."""
    names = {"127.0.0.1", "localhost", "::1", socket.gethostname(),
             socket.gethostname().split(".")[0]}
    try:
        names.update(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    hostname = shutil.which("hostname")
    if hostname:
        try:
            out = subprocess.run([hostname, "-I"], capture_output=True, text=True, timeout=5)
            names.update(out.stdout.split())
        except (OSError, subprocess.SubprocessError):
            pass
    return names


def visible_gpu_count(env: Mapping[str, str]) -> int:
    """GPUs this process can use, without loading CUDA: CUDA_VISIBLE_DEVICES when set, else the
    NVIDIA driver's device list, else `nvidia-smi -L`."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip()]
        # CUDA stops at the first invalid entry ("-1" is the usual way to hide every GPU).
        return next((i for i, v in enumerate(ids) if v.strip().startswith("-")), len(ids))
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10)
            return sum(line.startswith("GPU ") for line in out.stdout.splitlines())
        except (OSError, subprocess.SubprocessError):
            pass
    return 0


def free_ports(count: int, host: str = "") -> list[int]:
    """`count` distinct TCP ports free on this machine now (the OS picks them)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
