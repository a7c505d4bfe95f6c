"""The rendezvous of a job across nodes: node 0's paddle-launch listens at its address (the
first worker's port, see LaunchConfig.rendezvous_address); every other node's paddle-launch
connects, proves it belongs to this job, says which node it is, and gets back its part of the
job: the command of its MPI proxy (Hydra's `hydra_pmi_proxy`, which then fetches its ranks from
node 0's mpiexec).

On the wire, both ways: the job-token hello first (spmd.job_token; purpose "rendezvs" from a
joining node, "handoff" in node 0's answer), then one JSON line (no pickle). A joining node
sends `{"node": k, "nodes": [...], "nproc_per_node": n}`; node 0 answers `{"proxy": [...],
"log_dir": ..., "ranks": [...]}`, or `{"error": "..."}` for a node that does not fit (a wrong
index, another shape, a node that already joined). A node that joined tells node 0 later, the
same way, when its MPI proxy failed (`{"node": k, ..., "proxy_ended": code, "tail": "..."}`:
its ranks are gone, which node 0's mpiexec may not notice); node 0 answers `{"ok": true}`.
A connection that does not open with this job's hello is refused and logged before anything
else is read.

The token is SPMD_JOB_TOKEN when set (the same secret on every node); otherwise one derived
from the job's shape (nodes, port, workers per node, script and arguments), which keeps two
jobs apart but is no secret: set SPMD_JOB_TOKEN where others share the network.

Imported only by a launch across nodes (launch/multinode.py), never under an MPI process
manager, where importing spmd would arm its guard in the launcher.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Mapping

from spmd.job_token import hello, job_token, log_refused, read_hello

from .config import LaunchConfig
from .env import shared_token

MAX_LINE = 1 << 16
CONNECT_RETRY_S = 0.5


class JoinError(RuntimeError):
    """A node could not join the job; the message says why and what to do."""


def rendezvous_token(config: LaunchConfig, env: Mapping[str, str]) -> str:
    """SPMD_JOB_TOKEN, else a token derived from what every node's command shares."""
    return job_token(env) or shared_token(
        "spmd-rendezvous", config.cluster_node_ips, config.rendezvous_address[1],
        config.nproc_per_node, config.training_script, config.training_script_args)


def _shape(config: LaunchConfig) -> dict:
    return {"nodes": config.cluster_node_ips, "nproc_per_node": config.nproc_per_node}


def _read_line(sock: socket.socket, deadline_s: float) -> dict:
    """One JSON line within `deadline_s`; ValueError when it is not one."""
    data = b""
    end = time.monotonic() + deadline_s
    while b"\n" not in data:
        left = end - time.monotonic()
        if left <= 0 or len(data) > MAX_LINE:
            raise ValueError(f"no complete line within {deadline_s:g} s")
        sock.settimeout(left)
        chunk = sock.recv(4096)
        if not chunk:
            raise ValueError("the connection closed before a complete line")
        data += chunk
    value = json.loads(data.split(b"\n", 1)[0].decode("utf-8"))
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


class RendezvousServer:
    """Node 0's end. `parts[k]` is node k's answer (its proxy command and ranks);
    `joined` the nodes that got theirs. Serves in a thread until close()."""

    def __init__(self, config: LaunchConfig, token: str, parts: dict):
        self.config, self.token, self.parts = config, token, parts
        self.joined: dict[int, str] = {}
        self.proxy_ends: dict[int, tuple[int, str]] = {}  # node -> (its proxy's code, log tail)
        self.refused = 0
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        host, port = config.rendezvous_address
        try:
            self._sock.bind((host, port))
        except OSError as e:
            self._sock.close()
            raise JoinError(f"node 0 cannot listen for the other nodes at {host}:{port} ({e}): "
                            f"is {host} this machine's address (--node_ip), and the port free? "
                            f"Pick another with --started_port") from None
        self._sock.listen(16)
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="rendezvous", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                self._sock.settimeout(0.2)
                conn, peer = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn, peer), daemon=True).start()

    def _handle(self, conn: socket.socket, peer) -> None:
        where = "paddle-launch's rendezvous"
        with conn:
            why = read_hello(conn, self.token, "rendezvs")
            if why:
                self.refused += 1
                log_refused(where, peer, why)
                return
            try:
                ask = _read_line(conn, 5.0)
            except (ValueError, OSError, UnicodeDecodeError) as e:
                self.refused += 1
                log_refused(where, peer, f"a bad request ({e})")
                return
            answer = self._answer(ask, peer)
            try:
                conn.sendall(hello(self.token, "handoff") + json.dumps(answer).encode() + b"\n")
            except OSError:
                with self._lock:  # it never got its part: it may try again
                    self.joined.pop(ask.get("node"), None)

    def _answer(self, ask: dict, peer) -> dict:
        node = ask.get("node")
        count = len(self.config.cluster_node_ips)
        if not isinstance(node, int) or not 0 < node < count:
            return {"error": f"node {node!r} is not one of nodes 1..{count - 1} of this job"}
        mine = _shape(self.config)
        theirs = {k: ask.get(k) for k in mine}
        if theirs != mine:
            return {"error": f"node {node} runs another job shape ({theirs}) than node 0 "
                             f"({mine}): run the same paddle-launch command on every node"}
        if "proxy_ended" in ask:
            code, tail = ask.get("proxy_ended"), ask.get("tail", "")
            with self._lock:
                if node not in self.joined:
                    return {"error": f"node {node} never joined this job"}
                if isinstance(code, int) and isinstance(tail, str):
                    self.proxy_ends.setdefault(node, (code, tail[-2000:]))
            return {"ok": True}
        with self._lock:
            if node in self.joined:
                return {"error": f"node {node} already joined this job (from "
                                 f"{self.joined[node]})"}
            self.joined[node] = f"{peer[0]}:{peer[1]}"
        return self.parts[node]

    def missing(self) -> list[int]:
        """Nodes that have not joined yet."""
        with self._lock:
            return [k for k in range(1, len(self.config.cluster_node_ips))
                    if k not in self.joined]

    def proxy_failures(self) -> dict[int, tuple[int, str]]:
        """Nodes whose MPI proxy failed after they joined -> (its exit code, its log's end)."""
        with self._lock:
            return dict(self.proxy_ends)

    def close(self) -> None:
        self._closed = True
        self._sock.close()
        self._thread.join(2.0)


def report_proxy_end(config: LaunchConfig, token: str, code: int, tail: str) -> bool:
    """A node that joined: tell node 0 that its MPI proxy failed (one try: node 0 may be gone
    already, the job over). Whether node 0 took it."""
    host, port = config.rendezvous_address
    ask = dict(_shape(config), node=config.node_index, proxy_ended=code, tail=tail)
    try:
        with socket.create_connection((host, port), timeout=2.0) as sock:
            sock.sendall(hello(token, "rendezvs") + json.dumps(ask).encode() + b"\n")
            if read_hello(sock, token, "handoff", deadline_s=5.0):
                return False
            return bool(_read_line(sock, 5.0).get("ok"))
    except (OSError, ValueError):
        return False


def fetch_part(config: LaunchConfig, token: str, deadline: float) -> dict:
    """A joining node: reach node 0 (retrying until `deadline`, a time.monotonic()) and get
    this node's part of the job. Raises JoinError."""
    host, port = config.rendezvous_address
    ask = dict(_shape(config), node=config.node_index)
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=2.0) as sock:
                sock.sendall(hello(token, "rendezvs") + json.dumps(ask).encode() + b"\n")
                why = read_hello(sock, token, "handoff", deadline_s=10.0)
                if why:
                    raise JoinError(f"{host}:{port} answered, but not as this job's node 0: "
                                    f"{why}")
                answer = _read_line(sock, 10.0)
        except (OSError, ValueError) as e:
            last = str(e) or type(e).__name__
            time.sleep(CONNECT_RETRY_S)
            continue
        if "error" in answer:
            raise JoinError(f"node 0 ({host}:{port}) refused node {config.node_index}: "
                            f"{answer['error']}")
        return answer
    raise JoinError(
        f"node {config.node_index} ({config.node_ip}) could not reach node 0's paddle-launch at "
        f"{host}:{port} within {config.join_timeout:g} s ({last}): start the same "
        f"paddle-launch command on node 0 ({config.cluster_node_ips[0]}), and check that this "
        f"node reaches it at that address (--cluster_node_ips), or raise --join_timeout")
