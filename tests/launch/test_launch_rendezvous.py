"""The rendezvous of a job across nodes, on this machine's loopback (no root needed): node 0
hands each node its part once; a node of another job shape, a node index out of range, a node
that already joined, garbage, a truncated hello and another job's token are refused, and node
0 keeps serving; a joining node that finds nobody says so within its deadline."""
from __future__ import annotations

import socket
import time

import pytest

from launch.config import LaunchConfig
from launch.rendezvous import JoinError, RendezvousServer, fetch_part
from launch.scheduler import free_ports
from spmd.job_token import hello

pytestmark = pytest.mark.timeout(60)


def _config(node_ip: str, port: int, nproc: int = 2) -> LaunchConfig:
    return LaunchConfig("train.py", nproc_per_node=nproc, started_port=port,
                        cluster_node_ips=["127.0.0.1", "127.0.0.2", "127.0.0.3"],
                        node_ip=node_ip, join_timeout=5)


def _stranger(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        s.settimeout(8)
        try:
            return s.recv(100)
        except ConnectionResetError:
            return b""


def test_each_node_gets_its_part_once_and_strangers_none(capsys):
    port = free_ports(1)[0]
    node0 = _config("127.0.0.1", port)
    parts = {k: {"proxy": ["hydra_pmi_proxy", "--proxy-id", str(k)], "ranks": [2 * k]}
             for k in (1, 2)}
    server = RendezvousServer(node0, "job-a", parts)
    try:
        assert _stranger(port, b"\x00garbage" * 40) == b""
        assert _stranger(port, hello("job-a", "rendezvs")[:30]) == b""  # truncated
        assert _stranger(port, hello("job-b", "rendezvs") + b'{"node": 1}\n') == b""
        deadline = time.monotonic() + 5
        assert fetch_part(_config("127.0.0.2", port), "job-a", deadline) == parts[1]
        with pytest.raises(JoinError, match="node 1 already joined"):
            fetch_part(_config("127.0.0.2", port), "job-a", deadline)
        with pytest.raises(JoinError, match="another job shape"):
            fetch_part(_config("127.0.0.3", port, nproc=3), "job-a", deadline)
        assert server.missing() == [2]
        assert fetch_part(_config("127.0.0.3", port), "job-a", deadline) == parts[2]
        assert server.missing() == [] and server.refused == 3
    finally:
        server.close()
    err = capsys.readouterr().err
    assert err.count("refused a connection to paddle-launch's rendezvous") == 3, err
    assert "another job (its job token differs" in err and "truncated hello" in err


def test_a_node_that_finds_no_node_0_says_so():
    port = free_ports(1)[0]
    with pytest.raises(JoinError, match=rf"could not reach node 0's paddle-launch at "
                                        rf"127.0.0.1:{port} within 5 s"):
        fetch_part(_config("127.0.0.2", port), "job-a", time.monotonic() + 1.5)
