"""The join point of env-only trainers (spmd/comm/join_point.py, spmd/comm/join.py) in one
process: the hello's HMAC is checked before anything else, and trainer 0's gathering turns away
garbage, a truncated hello, another job's token, a duplicate and a wrong trainer count, logging
each, while it admits this job's trainers."""
from __future__ import annotations

import os
import socket
import threading
import time

from spmd.comm import join as jn
from spmd.comm import join_point as jp

KEY, _ = jp.job_key({"SPMD_JOB_TOKEN": "secret"})
OTHER, _ = jp.job_key({"SPMD_JOB_TOKEN": "another secret"})


def test_a_hello_verifies_only_with_its_key_and_nonce():
    nonce = jp.new_nonce()
    hello, mine = jp.pack_hello(KEY, nonce, 2, 3, jp.HERE)
    got = jp.check_hello(KEY, nonce, hello)
    assert (got.trainer, got.trainers, got.state, got.nonce) == (2, 3, jp.HERE, mine)
    assert jp.check_hello(OTHER, nonce, hello) is None  # another job's token
    assert jp.check_hello(KEY, jp.new_nonce(), hello) is None  # replayed to another accept
    assert jp.check_hello(KEY, nonce, hello[:-1]) is None  # truncated
    assert jp.check_hello(KEY, nonce, os.urandom(jp.HELLO)) is None  # garbage
    flipped = hello[:9] + bytes([hello[9] ^ 1]) + hello[10:]
    assert jp.check_hello(KEY, nonce, flipped) is None  # a field changed in transit


def test_without_a_token_the_key_is_the_jobs_layout():
    a = {"PADDLE_TRAINER_ENDPOINTS": "h:1,h:2", "PADDLE_TRAINERS_NUM": "2"}
    b = {"PADDLE_TRAINER_ENDPOINTS": "h:1,h:3", "PADDLE_TRAINERS_NUM": "2"}
    assert jp.job_key(a) == (jp.job_key(dict(a))[0], False)
    assert jp.job_key(a)[0] != jp.job_key(b)[0]
    assert jp.job_key({**a, "SPMD_JOB_TOKEN": "s"})[1] is True


def test_a_reply_verifies_only_from_trainer_zero():
    mine = jp.new_nonce()
    reply = jp.pack_reply(KEY, mine, b"PORT", "tag#0$port#1234$")
    head, payload = reply[:jp.REPLY_HEAD], reply[jp.REPLY_HEAD:]
    assert jp.reply_length(KEY, head) == (b"PORT", len(payload))
    assert jp.check_reply(KEY, mine, head, payload) == "tag#0$port#1234$"
    assert jp.check_reply(OTHER, mine, head, payload) is None
    assert jp.check_reply(KEY, jp.new_nonce(), head, payload) is None


def _env(port: int, trainers: int = 3) -> dict:
    endpoints = ",".join(f"127.0.0.1:{port + i}" for i in range(trainers))
    return {"PADDLE_TRAINER_ID": "0", "PADDLE_TRAINERS_NUM": str(trainers),
            "PADDLE_TRAINER_ENDPOINTS": endpoints, "PADDLE_CURRENT_ENDPOINT": f"127.0.0.1:{port}",
            "SPMD_JOB_TOKEN": "secret", "SPMD_JOIN_TIMEOUT": "20"}


def _hello(address, key, trainer, trainers, state=jp.HERE, text="", cut=None):
    sock = socket.create_connection(address, timeout=5)
    nonce = sock.recv(jp.NONCE)
    hello, _ = jp.pack_hello(key, nonce, trainer, trainers, state, text)
    sock.sendall(hello[:cut] if cut else hello)
    return sock


def test_trainer_zero_admits_its_trainers_and_refuses_the_rest():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    spec = jn.Spec(_env(port))
    refused: list[str] = []
    gathering = jn.Gathering(spec, listener, on_refused=refused.append)
    address = ("127.0.0.1", port)
    kept = []

    def strangers_then_trainers():
        kept.append(_hello(address, OTHER, 1, 3))  # another job
        with socket.create_connection(address, timeout=5) as s:  # garbage
            s.recv(jp.NONCE)
            s.sendall(os.urandom(jp.HELLO))
            time.sleep(0.2)
        kept.append(_hello(address, KEY, 1, 2))  # this job's token, not its trainer count
        kept.append(_hello(address, KEY, 1, 3, cut=20))  # truncated, held open
        kept.append(_hello(address, KEY, 1, 3))
        kept.append(_hello(address, KEY, 1, 3))  # trainer 1 again
        kept.append(_hello(address, KEY, 2, 3, state=0x10001, text="exit code 1: boom"))

    thread = threading.Thread(target=strangers_then_trainers)
    thread.start()
    gathering.run(time.monotonic() + 15)
    thread.join()
    try:
        assert sorted(gathering.joiners) == [1]
        assert gathering.absent == {2: "exit code 1: boom"}
        assert gathering.missing() == []
        reasons = "\n".join(refused)
        assert reasons.count("refused a connection from 127.0.0.1") >= 3, reasons
        assert "not this job's hello" in reasons
        assert "trainer 1 of 2, but this job has trainers 1..2 of 3" in reasons
        assert "trainer 1 has already joined" in reasons
    finally:
        for sock in kept:
            sock.close()
        gathering.close()


def test_which_processes_start_env_only():
    base = {"PADDLE_TRAINER_ID": "1", "PADDLE_TRAINERS_NUM": "2",
            "PADDLE_TRAINER_ENDPOINTS": "h:1,h:2", "PADDLE_CURRENT_ENDPOINT": "h:2"}
    assert jn.env_only_start(base)
    assert not jn.env_only_start({**base, "PMI_RANK": "1"})  # an MPI launcher started it
    assert not jn.env_only_start({**base, "PADDLE_PSERVERS_IP_PORT_LIST": "h:9"})  # pserver
    assert not jn.env_only_start({**base, "PADDLE_TRAINERS_NUM": "1"})
    assert not jn.env_only_start({**base, "PADDLE_TRAINER_ENDPOINTS": "h:1"})
    assert not jn.env_only_start({**base, "SPMD_ENV_START": "0"})
    assert not jn.env_only_start({**base, jn.MARK: "1"})
