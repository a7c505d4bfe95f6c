"""A real single-node SLURM cluster for tests/launch: Debian's slurmctld, slurmd and munge,
configured in a temporary directory and stopped after. Used by test_launch_slurm.py and the
fault matrix (fault_matrix.py)."""
from __future__ import annotations

import contextlib
import os
import pathlib
import random
import shutil
import signal
import socket
import subprocess
import time
import uuid
from types import SimpleNamespace

from launch_helpers import processes_with

from launch.scheduler import free_ports

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "sinfo")
SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])


def _which(name: str) -> str | None:
    return shutil.which(name, path=SEARCH)


def skip_reason() -> str | None:
    missing = [n for n in DAEMONS + CLIENTS if not _which(n)]
    if missing:
        return (f"SLURM test skipped: {', '.join(missing)} not installed; install with "
                f"`apt-get install slurmctld slurmd slurm-client munge`")
    if os.geteuid() != 0:
        return "SLURM test skipped: slurmd must run as root to start jobs"
    return None


SLURM_CONF = """\
ClusterName=spmdtest
FirstJobId={first_job_id}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge.sock
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
InactiveLimit=0
MinJobAge=5
KillWait=2
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def _wait_for(predicate, seconds: float, what: str, logs) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    tails = "\n".join(f"--- {p}:\n{tail(p)}" for p in logs)
    raise AssertionError(f"{what} not ready after {seconds} s\n{tails}")


def tail(path, n: int = 30) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(missing)"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def slurm_cluster(d: pathlib.Path):
    """A one-node SLURM cluster configured in the empty directory `d`; yields its environment
    for the client commands (SimpleNamespace: dir, env). Call skip_reason() first."""
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    token = uuid.uuid4().hex  # marks the daemons, to check none outlives the fixture
    env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"), LAUNCH_TEST_TOKEN=token)
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    ctld_port, slurmd_port = free_ports(2)
    host = socket.gethostname().split(".")[0]
    (d / "slurm.conf").write_text(SLURM_CONF.format(
        host=host, dir=d, ctld_port=ctld_port, slurmd_port=slurmd_port, cpus=os.cpu_count(),
        # MPICH names its shared memory after the job step; a job id that an earlier cluster
        # used could meet the segments an aborted job of that one left in /dev/shm.
        first_job_id=random.randrange(1_000, 60_000_000)))
    daemons = []

    def start(name: str, *args: str) -> None:
        with open(d / f"{name}.out", "wb") as out:
            daemons.append(subprocess.Popen([_which(name), *args], env=env, stdout=out,
                                            stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL))

    try:
        # --force: munged refuses root and a socket below a private directory otherwise
        start("munged", "-F", "--force", f"--socket={d}/munge.sock", f"--key-file={key}",
              f"--pid-file={d}/munged.pid", f"--seed-file={d}/munged.seed",
              f"--log-file={d}/munged.log")
        _wait_for(lambda: (d / "munge.sock").exists(), 20, "munged", [d / "munged.out"])
        start("slurmctld", "-D", "-i", "-f", str(d / "slurm.conf"))
        start("slurmd", "-D", "-f", str(d / "slurm.conf"))

        def idle() -> bool:
            out = subprocess.run([_which("sinfo"), "-h", "-o", "%T"], env=env,
                                 capture_output=True, text=True)
            return out.stdout.strip() == "idle"

        _wait_for(idle, 60, "the SLURM node",
                  [d / "slurmctld.out", d / "slurmd.out", d / "slurmctld.log", d / "slurmd.log"])
        yield SimpleNamespace(dir=d, env={"SLURM_CONF": str(d / "slurm.conf")})
    finally:
        for proc in reversed(daemons):
            _stop(proc)
        deadline = time.monotonic() + 10
        while processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = processes_with(token)
        assert not left, "SLURM daemons left behind:\n" + "\n".join(left)
