"""A job across nodes with paddle-launch on every node, as fluid's launcher ran (the same
command on each node, or PaddleCloud's variables): one MPI job, no ssh.

Node 0 starts the job: MPICH's mpiexec with Hydra's manual bootstrap prints one
`hydra_pmi_proxy` command per node instead of starting them; node 0 runs its own and hands each
other node its command over the rendezvous (launch/rendezvous.py, job-token checked). Each
other node's paddle-launch runs the proxy it was given, which fetches that node's ranks from
node 0's mpiexec: one MPI world of len(nodes) x nproc_per_node ranks, rank = node rank x
nproc_per_node + local rank, every rank with fluid's variables (launch/env.py).

Node 0 shows rank 0's output, watches the job as on one node and fails it, naming the nodes,
when one has not joined within --join_timeout, or when a node's MPI proxy failed after it
joined (that node's paddle-launch tells node 0 through the rendezvous, which stays open for
it). Across nodes MPI's process manager stops the ranks of the other nodes after a failure
(the launcher cannot see their processes).
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

from .collective import CollectiveJob, command
from .config import LaunchConfig
from .env import without_proxies
from .rendezvous import (
    JoinError,
    RendezvousServer,
    fetch_part,
    rendezvous_token,
    report_proxy_end,
)
from .supervisor import POLL_S, alive, die_with_launcher, escalate, kill, killpg

PROXY = "hydra_pmi_proxy"
PROXY_LIST_WAIT_S = 60.0  # mpiexec prints the proxies' commands at once; this bounds a hang
PROXY_REPORT_WAIT_S = 2.0  # a failing job: how long node 0 waits for a node's proxy report


def _proxy_log(config: LaunchConfig, node: int) -> str:
    return os.path.join(config.log_dir, f"proxylog.{node}")


def _local_proxy(config: LaunchConfig, args: list) -> list[str]:
    """A proxy command handed over the network, made safe to run here: a list of plain
    strings, run without a shell, this machine's own hydra_pmi_proxy as the program."""
    if not isinstance(args, list) or not args or not all(isinstance(a, str) and "\0" not in a
                                                         for a in args):
        raise JoinError(f"node 0 sent no usable proxy command ({args!r})")
    if os.path.basename(args[0]) != PROXY:
        raise JoinError(f"node 0 sent a command that is not MPI's proxy ({args[0]!r})")
    beside = os.path.join(os.path.dirname(config.mpi.launcher), PROXY) if config.mpi else ""
    program = beside if beside and os.access(beside, os.X_OK) else shutil.which(PROXY)
    if not program:
        where = config.mpi.launcher if config.mpi else "mpiexec"
        raise JoinError(f"no {PROXY} on this node (beside {where} or on PATH): install the "
                        f"same MPICH as on node 0")
    return [program, *args[1:]]


def _with_control_host(args: list[str], host: str) -> list[str]:
    """The proxy reaches node 0's mpiexec at node 0's own address (--node_ip), which every node
    reaches, rather than at whatever host name mpiexec put there."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == "--control-port":
            port = out[i + 1].rsplit(":", 1)[-1]
            out[i + 1] = f"{host}:{port}"
    return out


class NodeZeroJob(CollectiveJob):
    """Node 0's paddle-launch: the job of every node, started here."""

    def __init__(self, config: LaunchConfig):
        super().__init__(config)
        self.server: RendezvousServer | None = None
        self.proxy: subprocess.Popen | None = None
        self.deadline = 0.0

    def _start_process_manager(self, env: dict) -> subprocess.Popen:
        proc = subprocess.Popen(
            command(self.config), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_launcher)
        proxies: dict[int, list[str]] = {}
        listed = threading.Event()
        threading.Thread(target=self._read_mpiexec, args=(proc, proxies, listed),
                         daemon=True).start()
        if not listed.wait(PROXY_LIST_WAIT_S) or len(proxies) != len(self.config.cluster_node_ips):
            kill(proc.pid, signal.SIGKILL)
            raise JoinError(f"mpiexec did not list one proxy per node (got {sorted(proxies)}); "
                            f"see {self.mpi_log}")
        host = self.config.node_ip
        with open(_proxy_log(self.config, 0), "wb") as out:
            self.proxy = subprocess.Popen(
                _with_control_host(proxies[0], host), env=env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=die_with_launcher)
        n = self.config.nproc_per_node
        parts = {k: {"proxy": _with_control_host(proxies[k], host),
                     "log_dir": self.config.log_dir, "ranks": list(range(k * n, (k + 1) * n))}
                 for k in range(1, len(self.config.cluster_node_ips))}
        self.server = RendezvousServer(self.config, rendezvous_token(self.config, os.environ),
                                       parts)
        self.deadline = time.monotonic() + self.config.join_timeout
        return proc

    def _read_mpiexec(self, proc: subprocess.Popen, proxies: dict, listed) -> None:
        """mpiexec's output: the proxies' commands (to hand out), the rest to mpi.log."""
        with open(self.mpi_log, "wb") as log:
            for line in proc.stdout:
                if line.startswith(b"HYDRA_LAUNCH: "):
                    args = shlex.split(line[len(b"HYDRA_LAUNCH: "):].decode())
                    index = args.index("--proxy-id") if "--proxy-id" in args else -1
                    if 0 <= index < len(args) - 1 and args[index + 1].isdigit():
                        proxies[int(args[index + 1])] = args
                elif line.startswith(b"HYDRA_LAUNCH_END"):
                    listed.set()
                else:
                    log.write(line)
                    log.flush()
        listed.set()

    def _lost_nodes(self, wait_s: float = 0.0) -> str:
        """Why the job failed when a node's MPI proxy failed after it joined ('' if none
        did): waiting up to `wait_s` for a node's word, which may follow what node 0 saw."""
        deadline = time.monotonic() + wait_s
        while self.server is not None:
            ended = self.server.proxy_failures()
            if ended or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        else:
            return ""
        nodes, n = self.config.cluster_node_ips, self.config.nproc_per_node
        said = []
        for k, (code, tail) in sorted(ended.items()):
            how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            last = "; its log ends: " + " | ".join(tail.strip().splitlines()[-3:]) \
                if tail.strip() else ""
            said.append(f"node {k} ({nodes[k]}): its MPI proxy ({PROXY}) failed after the "
                        f"node joined ({how}), so its ranks {k * n}-{(k + 1) * n - 1} are "
                        f"gone; see {_proxy_log(self.config, k)} there{last}")
        return "; ".join(said)

    def _root_cause(self, stopped: set, reason: str, code: int | None):
        """A node whose proxy failed is the cause of what every other rank then saw."""
        lost = self._lost_nodes(PROXY_REPORT_WAIT_S)
        if lost:
            return None, lost, 1 if code is None else code
        return super()._root_cause(stopped, reason, code)

    def _check(self) -> str:
        if self.server is not None:
            lost = self._lost_nodes()
            if lost:
                return lost
            missing = self.server.missing()  # the server stays open: a proxy may fail later
            if missing and time.monotonic() > self.deadline:
                nodes = self.config.cluster_node_ips
                named = ", ".join(f"node {k} ({nodes[k]})" for k in missing)
                return (f"{named} never joined the job within --join_timeout "
                        f"{self.config.join_timeout:g} s: run the same paddle-launch command "
                        f"there (--cluster_node_ips {','.join(nodes)} --node_ip "
                        f"{nodes[missing[0]]}), and check it reaches "
                        f"{':'.join(map(str, self.config.rendezvous_address))}")
        return super()._check()

    def _stop(self, running: list[int]) -> None:
        super()._stop(running)
        self._stop_proxy()

    def _stop_proxy(self) -> None:
        if self.proxy is not None:
            escalate(lambda sig: killpg(self.proxy.pid, sig), lambda: self.proxy.poll() is None)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        if self.proxy is not None and self.proxy.poll() is None:
            try:  # mpiexec ended: the proxy ends with it
                self.proxy.wait(5.0)
            except subprocess.TimeoutExpired:
                self._stop_proxy()


def start_node_zero(config: LaunchConfig) -> int:
    """Node 0: start the job of every node and watch it; the launcher's exit status."""
    try:
        return NodeZeroJob(config).run()
    except JoinError as e:
        print(f"paddle-launch: error: {e}", file=sys.stderr, flush=True)
        return 1


def join_job(config: LaunchConfig) -> int:
    """Node k > 0: get this node's part from node 0 and run it; the exit status of this node's
    part (its ranks' output is on node 0's console and in log_dir/workerlog.N)."""
    tag = f"paddle-launch: node {config.node_index} ({config.node_ip})"
    token = rendezvous_token(config, os.environ)
    try:
        part = fetch_part(config, token, time.monotonic() + config.join_timeout)
        proxy = _local_proxy(config, part.get("proxy"))
    except JoinError as e:
        print(f"paddle-launch: error: {e}", file=sys.stderr, flush=True)
        return 1
    log_dir = part.get("log_dir") if isinstance(part.get("log_dir"), str) else config.log_dir
    os.makedirs(log_dir, exist_ok=True)  # the workers' logs go where node 0 says
    ranks = part.get("ranks") or []
    host, port = config.rendezvous_address
    print(f"{tag} joined the job of node 0 ({host}:{port}); ranks "
          f"{ranks[0] if ranks else '?'}-{ranks[-1] if ranks else '?'} run here, their output "
          f"is on node 0's console and in {log_dir}/workerlog.N", flush=True)
    env = without_proxies(os.environ)
    stop: list[int] = []

    def on_signal(signum, frame):
        stop.append(signum)

    previous = {s: signal.signal(s, on_signal)
                for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with open(_proxy_log(config, config.node_index), "wb") as out:
            child = subprocess.Popen(proxy, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=die_with_launcher)
        while child.poll() is None:
            if stop:
                escalate(lambda sig: killpg(child.pid, sig), lambda: child.poll() is None)
                return 128 + stop[0]
            time.sleep(POLL_S)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    _stop_ranks_left(ranks, log_dir)  # its proxy gone, a rank of this node may still run
    proxy_rc = child.returncode
    rc = proxy_rc if proxy_rc >= 0 else 128 - proxy_rc
    failed = _failed_ranks(ranks, log_dir)
    if _proxy_failed(proxy_rc, ranks, log_dir):  # node 0 may not see it: tell it
        told = report_proxy_end(config, token, proxy_rc, _tail(_proxy_log(config,
                                                                          config.node_index)))
        print(f"{tag}: this node's MPI proxy failed ("
              + (f"killed by signal {-proxy_rc}" if proxy_rc < 0 else f"exit code {proxy_rc}")
              + f"; {_proxy_log(config, config.node_index)}); "
              + ("node 0 was told" if told else "node 0 could not be told (it ended?)"),
              file=sys.stderr, flush=True)
        rc = rc or 1
    if failed and not rc:  # MPI's proxy ends with 0 when node 0 stopped its ranks
        rc = 1
    how = f"exit code {rc}" + (f"; rank(s) {', '.join(map(str, failed))} of this node did not "
                               f"end cleanly (node 0 reports the job)" if failed else "")
    print(f"{tag}: this node's part ended, {how}", file=sys.stderr if rc else sys.stdout,
          flush=True)
    for rank, error in failed.items():  # what node 0 cannot read without a shared file system
        if error:
            print(f"{tag}: rank {rank}: {error} (log {log_dir}/workerlog.{rank})",
                  file=sys.stderr, flush=True)
    return rc


def _stop_ranks_left(ranks: list, log_dir: str) -> None:
    """Stop this node's ranks that outlive its proxy (a proxy killed leaves them orphans,
    waiting in a collective for ranks that are gone), by the pids their status files give."""
    import socket

    from spmd.status_file import read_status

    host, pids = socket.gethostname(), []
    for rank in ranks:
        status = read_status(os.path.join(log_dir, f"workerstatus.{rank}"))
        if status.ended is None and status.host == host:
            pids += [p for p in (status.supervisor_pid, status.pid) if alive(p)]
    if pids:
        escalate(lambda sig: [kill(p, sig) for p in pids], lambda: any(alive(p) for p in pids))


def _proxy_failed(code: int, ranks: list, log_dir: str) -> bool:
    """Whether this node's proxy failed by itself rather than ended with its ranks: killed by a
    signal (none is sent to it when the job ends: mpiexec tells it over its connection), or
    ended with a code before any of its ranks started."""
    from spmd.status_file import read_status

    if code < 0:
        return True
    started = any(read_status(os.path.join(log_dir, f"workerstatus.{r}")).started is not None
                  for r in ranks)
    return code != 0 and not started


def _tail(path: str, lines: int = 10) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def _failed_ranks(ranks: list, log_dir: str) -> dict[int, str]:
    """This node's ranks whose status file says they failed (or never ended) -> the error
    each recorded ('' if none)."""
    from spmd.status_file import read_status

    out = {}
    for rank in ranks:
        status = read_status(os.path.join(log_dir, f"workerstatus.{rank}"))
        if status.failed or (status.started is not None and status.ended is None):
            out[rank] = status.error or ""
    return out
