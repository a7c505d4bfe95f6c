"""examples/slurm/train.sbatch on a real single-node SLURM cluster started on this machine:
Debian's slurmctld, slurmd and munge, configured in a temporary directory, stopped after.

Skipped, with the reason, where those are not installed (.ci/run installs them) or where this
is not root (slurmd must start jobs as their user).
"""
from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from types import SimpleNamespace

import pytest
from launch_helpers import PYTHON, ROOT, processes_with, run

from launch.scheduler import free_ports

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "sinfo")
SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])


def _which(name: str) -> str | None:
    return shutil.which(name, path=SEARCH)


def _skip_reason() -> str | None:
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
    tails = "\n".join(f"--- {p}:\n{_tail(p)}" for p in logs)
    raise AssertionError(f"{what} not ready after {seconds} s\n{tails}")


def _tail(path, n: int = 30) -> str:
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


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A one-node SLURM cluster; yields its environment for the client commands."""
    reason = _skip_reason()
    if reason:
        print(reason)
        pytest.skip(reason)
    d = tmp_path_factory.mktemp("slurm")
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


def _trained(section: str) -> dict:
    """rank -> (first loss, last loss) from `rank r/n trained: loss A -> B` lines."""
    found = {}
    for rank, size, first, last in re.findall(
            r"rank (\d+)/(\d+) trained: loss ([0-9.]+) -> ([0-9.]+)", section):
        assert size == "2", section
        found[int(rank)] = (float(first), float(last))
    return found


def test_sbatch_trains_on_2_ranks_every_way(slurm, tmp_path, token):
    out = tmp_path / "job.out"
    path = f"{os.path.dirname(PYTHON)}{os.pathsep}{os.environ.get('PATH', '')}"
    res = run(["sbatch", "--wait", "--output", str(out), "examples/slurm/train.sbatch"], token,
              timeout=180, cwd=ROOT, PATH=path, PYTHON=PYTHON, STEPS="10",
              LOG_DIR=str(tmp_path / "log"), **slurm.env)
    text = out.read_text() if out.exists() else "(no job output)"
    assert res.returncode == 0, f"{res.output}\n{text}\n{_tail(slurm.dir / 'slurmd.log')}"
    sections = dict(re.findall(r"^== form (\S+)\n(.*?)(?=^== form |\Z)", text, re.M | re.S))
    assert set(sections) == {"srun", "mpiexec", "paddle-launch"}, text
    # paddle-launch took its nodes and processes per node from the allocation
    assert re.search(r"scheduler +: slurm", sections["paddle-launch"]), text
    assert re.search(r"workers +: 2 = 1 node\(s\) x 2", sections["paddle-launch"]), text
    for form, section in sections.items():
        trained = _trained(section)
        assert set(trained) == {0, 1}, f"{form}: not every rank trained:\n{section}"
        for rank, (first, last) in trained.items():
            assert last < first / 10, f"{form} rank {rank}: loss {first} -> {last}"


def test_srun_rank_that_raises_ends_the_job(slurm, token):
    # No launcher: spmd's MPI initialization turns an uncaught exception into MPI_Abort,
    # which makes srun end every task of the step.
    script = str(ROOT / "tests" / "launch" / "scripts" / "crash.py")
    res = run(["srun", "--mpi=pmi2", "-n", "2", PYTHON, script, "--mode", "raise", "--rank", "1",
               "--token", token], token, timeout=60, **slurm.env)
    assert res.returncode != 0 and res.seconds < 15, res.output[-3000:]
    assert "ZeroDivisionError: rank 1 failed on purpose" in res.output
