"""Real SLURM clusters for tests/launch: Debian's slurmctld, slurmd and munge, configured in a
temporary directory and stopped after. slurm_cluster: one node (test_launch_slurm.py, the
fault matrix); slurm_two_node_cluster: two emulated nodes (netns.py), one slurmd in each node's
network and UTS namespace under that node's name, slurmctld in node 0's
(test_multi_node_slurm.py)."""
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
SlurmctldHost={host}({addr})
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge.sock
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool-%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd-%n.log
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
{nodes}
PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""
NODE_LINE = "NodeName={name} NodeAddr={addr} CPUs={cpus} State=UNKNOWN"


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


def _write_conf(d: pathlib.Path, ctld_host: str, ctld_addr: str, nodes: list) -> dict:
    """slurm.conf for `nodes` ((name, address) pairs) and the munge key; the environment of
    the daemons (marked with a token, to check none outlives the fixture)."""
    token = uuid.uuid4().hex
    env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"), LAUNCH_TEST_TOKEN=token)
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    ctld_port, slurmd_port = free_ports(2)
    lines = "\n".join(NODE_LINE.format(name=name, addr=addr, cpus=os.cpu_count())
                      for name, addr in nodes)
    (d / "slurm.conf").write_text(SLURM_CONF.format(
        host=ctld_host, addr=ctld_addr, dir=d, ctld_port=ctld_port, slurmd_port=slurmd_port,
        nodes=lines, names=",".join(name for name, _ in nodes),
        # MPICH names its shared memory after the job step; a job id that an earlier cluster
        # used could meet the segments an aborted job of that one left in /dev/shm.
        first_job_id=random.randrange(1_000, 60_000_000)))
    return env


@contextlib.contextmanager
def _daemons(d: pathlib.Path, env: dict, starts: list, client=None):
    """munged, then each (name, argv, wrap) of `starts` (wrap: runs argv in a node, or None),
    until sinfo (run through `client`) says every node is idle."""
    daemons = []

    def start(name: str, argv: list, wrap=None) -> None:
        cmd = [_which(argv[0]), *argv[1:]]
        with open(d / f"{name}.out", "wb") as out:
            daemons.append(subprocess.Popen(wrap(cmd) if wrap else cmd, env=env, stdout=out,
                                            stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL))

    try:
        # --force: munged refuses root and a socket below a private directory otherwise
        start("munged", ["munged", "-F", "--force", f"--socket={d}/munge.sock",
                         f"--key-file={d}/munge.key", f"--pid-file={d}/munged.pid",
                         f"--seed-file={d}/munged.seed", f"--log-file={d}/munged.log"])
        _wait_for(lambda: (d / "munge.sock").exists(), 20, "munged", [d / "munged.out"])
        for name, argv, wrap in starts:
            start(name, argv, wrap)

        def idle() -> bool:
            cmd = [_which("sinfo"), "-h", "-o", "%T"]
            out = subprocess.run(client(cmd) if client else cmd, env=env,
                                 capture_output=True, text=True)
            states = out.stdout.split()
            return bool(states) and set(states) == {"idle"}

        logs = sorted(d.glob("*.out")) + sorted(d.glob("*.log"))
        _wait_for(idle, 60, "the SLURM nodes", logs)
        yield
    finally:
        for proc in reversed(daemons):
            _stop(proc)
        token = env["LAUNCH_TEST_TOKEN"]
        deadline = time.monotonic() + 10
        while processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = processes_with(token)
        assert not left, "SLURM daemons left behind:\n" + "\n".join(left)


@contextlib.contextmanager
def slurm_cluster(d: pathlib.Path):
    """A one-node SLURM cluster configured in the empty directory `d`; yields its environment
    for the client commands (SimpleNamespace: dir, env). Call skip_reason() first."""
    host = socket.gethostname().split(".")[0]
    for sub in ("state", f"spool-{host}"):
        (d / sub).mkdir()
    env = _write_conf(d, host, "127.0.0.1", [(host, "127.0.0.1")])
    conf = str(d / "slurm.conf")
    with _daemons(d, env, [("slurmctld", ["slurmctld", "-D", "-i", "-f", conf], None),
                           ("slurmd", ["slurmd", "-D", "-f", conf], None)]):
        yield SimpleNamespace(dir=d, env={"SLURM_CONF": conf})


@contextlib.contextmanager
def slurm_two_node_cluster(d: pathlib.Path, nodes):
    """A SLURM cluster of the two emulated nodes `nodes` (netns.two_nodes(resolvable=True)):
    slurmctld in node 0, a slurmd in each under its node's name. Yields SimpleNamespace(dir,
    env); run the client commands in a node (node.run / node.popen)."""
    (d / "state").mkdir()
    first = nodes[0]
    env = _write_conf(d, first.host, first.ip, [(n.host, n.ip) for n in nodes])
    conf = str(d / "slurm.conf")
    starts = [("slurmctld", ["slurmctld", "-D", "-i", "-f", conf], first.wrap)]
    starts += [(f"slurmd-{n.host}", ["slurmd", "-D", "-N", n.host, "-f", conf],
                n.wrap_with_cgroup) for n in nodes]
    for n in nodes:
        (d / f"spool-{n.host}").mkdir()
    with _daemons(d, env, starts, client=first.wrap):
        yield SimpleNamespace(dir=d, env={"SLURM_CONF": conf})
