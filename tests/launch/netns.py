"""Two emulated nodes on this machine for tests/launch: two network namespaces joined by a veth
pair (private addresses 10.77.0.1 and 10.77.0.2, no route out), each command run in its node's
namespace under its node's own host name (a UTS namespace per command, named alike), so MPI
sees two hosts. Everything is removed on exit, also when the test fails: the processes still in
either namespace are killed first.

    with two_nodes() as (a, b):
        a.popen(["paddle-launch", ...]); b.popen(["paddle-launch", ...])

Facts the tests build on (measured): across network namespaces UCX needs UCX_TLS=tcp,self
(otherwise MPI finds one host and tries shared memory), which `Node.env` sets; each emulated
node needs its own host name to be a node, one that MPICH's Hydra reads from
SLURM_JOB_NODELIST as one host (see `node_tag`). Needs root (`ip netns`, `unshare`):
skip_reason() says why not where it cannot run.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field

SUBNET = "10.77.0"
EMULATION_ENV = {"UCX_TLS": "tcp,self"}
# Hydra's SLURM node-list parser (MPICH 5.0.2, built without libslurm: the POSIX-regex one in
# src/pm/hydra/lib/tools/bootstrap/external/slurm_query_node_list.c) first tries SLURM's old
# range syntax, `host001-host012`: an element LETTERS DIGITS-LETTERS DIGITS is a range. A node
# named node0-a32178 was read as the 32179 hosts node0 ... node32178; their core counts were
# read past the end of SLURM_TASKS_PER_NODE's two entries, one came out 0, and every mpiexec in
# that allocation died of SIGFPE in HYDU_dceil(active_processes, core_count) while mapping
# ranks to nodes (get_max_overscribe, lib/utils/rankmap.c; test_hydra_slurm_nodelist.py). A
# random hex tag has that form about 1 time in 12: the "flake" of 2 in ~9 suite runs.
HYDRA_OLD_RANGE = re.compile(r"[a-z]+[0-9]+-[a-z]+[0-9]+", re.I)
CGROUP_V1 = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids")


def skip_reason() -> str | None:
    """Why two emulated nodes cannot be made here, or None."""
    if os.geteuid() != 0:
        return "two emulated nodes need root (network namespaces): run as root, as CI does"
    missing = [n for n in ("ip", "unshare") if not shutil.which(n)]
    if missing:
        return (f"two emulated nodes need {', '.join(missing)}: "
                f"`apt-get install iproute2 util-linux`")
    probe = f"spmdprobe{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode:
        return f"network namespaces cannot be made here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def node_tag(hex_digits: str | None = None) -> str:
    """Six characters naming one pair of emulated nodes (namespaces, veth, host names) apart
    from any other pair: hex, its first character a decimal digit, so that a host name
    `node<i>-<tag>` is never in Hydra's old range form (HYDRA_OLD_RANGE) and Hydra reads it
    as the one host it is. `hex_digits`: the random part (default: a fresh uuid's)."""
    hex_digits = (hex_digits or uuid.uuid4().hex)[:6]
    return str(int(hex_digits[0], 16) % 10) + hex_digits[1:]


def host_name(index: int, tag: str) -> str:
    """Node `index`'s host name."""
    return f"node{index}-{tag}"


@dataclass
class Node:
    """One emulated node: its namespace, address and host name."""

    index: int
    ns: str
    ip: str
    host: str
    procs: list = field(default_factory=list)

    def wrap(self, cmd: list[str], cgroup: bool = False) -> list[str]:
        """`cmd` run inside this node (its network namespace, its host name). `cgroup`: with
        a cgroup file system on /sys/fs/cgroup, which `ip netns exec` hides under the node's
        own /sys (slurmd needs one)."""
        # the machine's controllers again, as the machine has them (cgroup v1 on a tmpfs)
        mount = ("mount -t tmpfs cgroup /sys/fs/cgroup && for c in " + " ".join(CGROUP_V1) +
                 "; do mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup "
                 "/sys/fs/cgroup/$c; done; mkdir -p /sys/fs/cgroup/systemd && mount -t cgroup "
                 "-o none,name=systemd cgroup /sys/fs/cgroup/systemd; ") if cgroup else ""
        return ["ip", "netns", "exec", self.ns, "unshare", "--uts", "sh", "-c",
                f'{mount}hostname "$0" && exec "$@"', self.host, *cmd]

    def wrap_with_cgroup(self, cmd: list[str]) -> list[str]:
        return self.wrap(cmd, cgroup=True)

    def env(self, base: dict) -> dict:
        return {**base, **EMULATION_ENV}

    def popen(self, cmd: list[str], env: dict, **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(self.wrap(cmd), env=self.env(env), **kwargs)
        self.procs.append(proc)
        return proc

    def run(self, cmd: list[str], env: dict, timeout: float = 60, **kwargs):
        return subprocess.run(self.wrap(cmd), env=self.env(env), timeout=timeout,
                              capture_output=True, text=True, **kwargs)

    def pids(self) -> list[int]:
        """Processes in this node's network namespace now."""
        out = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split() if p.isdigit() and _alive(int(p))]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _remove(nodes: list[Node]) -> list[str]:
    """Kill what runs in the nodes, delete their namespaces; returns what was still running."""
    left = []
    for node in nodes:
        for proc in node.procs:
            if proc.poll() is None:
                proc.kill()
        pids = node.pids()
        if pids:
            left += [f"{node.host}: pid {p}" for p in pids]
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while node.pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        for proc in node.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        subprocess.run(["ip", "netns", "del", node.ns], capture_output=True)
    return left


@contextlib.contextmanager
def two_nodes(resolvable: bool = False):
    """Yields (node 0, node 1); removes both on exit. Call skip_reason() first.
    `resolvable`: each node's /etc/hosts names both (`ip netns exec` puts /etc/netns/NS/hosts
    there), as a cluster's DNS would; otherwise a node's name resolves nowhere but in itself
    (and not even there), so only addresses work."""
    tag = node_tag()
    nodes = [Node(i, f"spmd{tag}n{i}", f"{SUBNET}.{i + 1}", host_name(i, tag)) for i in range(2)]
    made: list[Node] = []
    etc = [f"/etc/netns/{n.ns}" for n in nodes]
    try:
        for node in nodes:
            _ip("netns", "add", node.ns)
            made.append(node)
        if resolvable:
            hosts = "127.0.0.1 localhost\n" + "".join(f"{n.ip} {n.host}\n" for n in nodes)
            for path in etc:
                os.makedirs(path, exist_ok=True)
                with open(f"{path}/hosts", "w") as f:
                    f.write(hosts)
        veth = [f"ve{tag}{i}" for i in range(2)]
        _ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
        for node, dev in zip(nodes, veth):
            _ip("link", "set", dev, "netns", node.ns)
            _ip("-n", node.ns, "addr", "add", f"{node.ip}/24", "dev", dev)
            _ip("-n", node.ns, "link", "set", dev, "up")
            _ip("-n", node.ns, "link", "set", "lo", "up")
        yield nodes[0], nodes[1]
    finally:
        _remove(made)
        for path in etc:
            shutil.rmtree(path, ignore_errors=True)


def left_in(nodes) -> list[str]:
    """Processes still running in the nodes (a test asserts none before leaving)."""
    return [f"{n.host}: pid {p}" for n in nodes for p in n.pids()]
