"""The supervisors' channel admits only this job's supervisors (issue 23 items 4, 8): garbage,
a truncated hello, another job's token and a bad hello line are refused and logged without
counting as a rank, and the job's own departures still reach everyone; the addresses offered
are the node's own."""
from __future__ import annotations

import socket
import time

import pytest

from spmd.guard import channel as ch
from spmd.job_token import HELLO_DEADLINE_S, hello

pytestmark = pytest.mark.timeout(60)


def _pump(channels, until, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not until() and time.monotonic() < deadline:
        for c in channels:
            c.poll(0.01)
    assert until()


def _stranger(port: int, data: bytes, keep_open: bool = False) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(data)
    if not keep_open:
        s.close()
    return s


def test_strangers_are_refused_and_the_job_goes_on(monkeypatch, capsys):
    monkeypatch.delenv("SPMD_JOB_TOKEN", raising=False)
    listener = ch.listen(env={"MPI_LOCALNRANKS": "3", "PMI_SIZE": "3"})
    assert listener.getsockname()[0] == "127.0.0.1"  # every rank on this node: loopback only
    port = listener.getsockname()[1]
    seen = {r: [] for r in range(3)}
    root = ch.Channel(0, 3, listener, seen[0].append)
    addresses = ch.candidate_addresses(port, env={})
    assert addresses.startswith(f"127.0.0.1:{port};token=")  # made by rank 0, sent over MPI
    one = ch.Channel(1, 3, None, seen[1].append)
    assert one.connect(addresses)
    _pump([root, one], lambda: root.peers_connected == 1)
    truncated = _stranger(port, hello("other", "channel")[:20], keep_open=True)
    _stranger(port, b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)))
    _stranger(port, hello("another job", "channel") + b"hello 2\n")
    _stranger(port, hello(addresses.split("=")[1], "channel") + b"hello 7\n")  # no rank 7
    _pump([root, one], lambda: root.refused == 3)
    time.sleep(HELLO_DEADLINE_S + 0.2)
    _pump([root, one], lambda: root.refused == 4)  # the truncated one timed out
    truncated.close()
    assert root.peers_connected == 1 and not seen[0] and not seen[1]
    err = capsys.readouterr().err
    for why in ("not spmd's hello", "another job", "a bad hello line 'hello 7'",
                "no whole hello within"):
        assert "refused a connection to the supervisors' channel from 127.0.0.1:" in err
        assert why in err, err
    # the job's own rank 2 still gets in, and departures reach everyone
    two = ch.Channel(2, 3, None, seen[2].append)
    assert two.connect(addresses)
    _pump([root, one, two], lambda: root.peers_connected == 2)
    two.leave({"code": 0, "signal": 0, "collectives": 3, "steps": 1, "how": 1})
    _pump([root, one, two], lambda: seen[0] and seen[1])
    assert seen[0][0]["rank"] == seen[1][0]["rank"] == 2
    for c in (root, one, two):
        c.close()


def test_a_shared_token_travels_in_the_environment_not_the_address(monkeypatch):
    monkeypatch.setenv("SPMD_JOB_TOKEN", "s3cret")
    listener = ch.listen(env={"SPMD_JOB_TOKEN": "s3cret", "MPI_LOCALNRANKS": "2",
                              "PMI_SIZE": "2"})
    port = listener.getsockname()[1]
    root = ch.Channel(0, 2, listener, lambda info: None)
    addresses = ch.candidate_addresses(port, env={"SPMD_JOB_TOKEN": "s3cret"})
    assert "token" not in addresses and "s3cret" not in addresses
    assert addresses == f"127.0.0.1:{port}"  # one node: loopback, the one address it listens on
    other = ch.Channel(1, 2, None, lambda info: None)
    assert other.connect(addresses)
    _pump([root, other], lambda: root.peers_connected == 1)
    root.close()
    other.close()


def test_the_nodes_own_address_is_where_rank_0_listens():
    mine = ch.interface_addresses()
    if not mine:
        pytest.skip("this machine has no interface address but loopback")
    listener = ch.listen(env={"POD_IP": mine[0]})
    try:
        assert listener.getsockname()[0] == mine[0]
        assert ch.candidate_addresses(listener.getsockname()[1], env={}).split(";")[0] == \
            f"{mine[0]}:{listener.getsockname()[1]}"
    finally:
        listener.close()


def _bound_to(env: dict) -> str:
    listener = ch.listen(env=env)
    try:
        return listener.getsockname()[0]
    finally:
        listener.close()


def _an_interface_address() -> str:
    mine = ch.interface_addresses()
    if not mine:
        pytest.skip("this machine has no interface address but loopback")
    return mine[0]


TWO_NODES = {"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALNRANKS": "2"}  # 2 of 4 ranks here


@pytest.mark.parametrize("name", ["PMI_HOSTNAME", "PMIX_HOSTNAME", "SLURMD_NODENAME"])
def test_a_node_named_by_the_process_manager_is_where_rank_0_listens(name):
    ip = _an_interface_address()
    assert _bound_to({**TWO_NODES, name: ip}) == ip


def test_a_node_name_resolving_to_loopback_is_no_address_for_other_nodes():
    """Debian's /etc/hosts gives the host name 127.0.1.1: the other nodes cannot reach it."""
    with pytest.raises(ch.NodeAddressUnknown) as err:
        ch.listen(env={**TWO_NODES, "PMI_HOSTNAME": "localhost"})
    assert "PMI_HOSTNAME=localhost: not an address of this machine" in str(err.value)


def test_an_env_only_trainer_on_loopback_listens_on_loopback():
    env = {"SPMD_JOIN_START": "1", "PMI_RANK": "0", "PMI_SIZE": "1", "MPI_LOCALNRANKS": "1",
           "PADDLE_CURRENT_ENDPOINT": "127.0.0.1:6170"}
    assert _bound_to(env) == "127.0.0.1"


def test_a_multi_node_job_without_an_address_says_what_to_set():
    with pytest.raises(ch.NodeAddressUnknown) as err:
        ch.listen(env={**TWO_NODES, "PMI_HOSTNAME": "nowhere.invalid"})
    why = str(err.value)
    for words in ("no address to listen on", "4 ranks, 2 of them on this one",
                  "PMI_HOSTNAME=nowhere.invalid", "Set POD_IP=<this node's address>",
                  "mpiexec -hosts", "paddle-launch", "SPMD_SUPERVISE=0"):
        assert words in why, why
    with pytest.raises(ch.NodeAddressUnknown, match="does not say that every rank"):
        ch.listen(env={})  # a process manager that says nothing of its nodes


@pytest.mark.parametrize("env", [{**TWO_NODES, "POD_IP": "<ip>"},
                                 {**TWO_NODES, "PADDLE_CURRENT_ENDPOINT": "<ip>:6170"},
                                 {**TWO_NODES, "PMI_HOSTNAME": "<ip>"},
                                 {"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALNRANKS": "2"}])
def test_never_on_every_interface(env):
    ip = _an_interface_address()
    env = {k: v.replace("<ip>", ip) for k, v in env.items()}
    assert _bound_to(env) in (ip, "127.0.0.1")
