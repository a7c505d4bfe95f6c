"""spmd.ps.rpc: a real gRPC pserver and its clients on localhost. Every call of the surface,
concurrent clients, retries while a pserver starts, deadlines against one that never answers,
and bad requests answered with an error to their sender only while everyone else is served."""
from __future__ import annotations

import logging
import pickle
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from spmd.core.lod import LoDTensor
from spmd.core.selected_rows import SelectedRows
from spmd.errors import CommunicationError, InvalidArgumentError
from spmd.ps.handler import InMemoryHandler, PServerHandler
from spmd.ps.rpc import (
    SERVICE,
    PServer,
    PServerClient,
    PServerUnavailable,
    RequestRejected,
    RpcError,
    RpcTimeout,
    parse_endpoint,
)
from spmd.ps.wire import encode_frame

grpc = pytest.importorskip("grpc")
pytestmark = pytest.mark.timeout(60)


def _vars():
    return {"w": np.zeros((4, 3), "float32"), "b": np.zeros(3, "float64"),
            "emb": np.arange(20.0, dtype="float32").reshape(10, 2),
            "seq": LoDTensor(np.zeros((5, 1), "int64"), [[0, 2, 5]])}


@pytest.fixture
def pserver():
    handler = InMemoryHandler(_vars(), trainers=2)
    with PServer("127.0.0.1:0", handler, trainers=2, max_wait_s=10) as server:
        yield server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_call_round_trips(pserver):
    c0 = PServerClient(pserver.endpoint, 0, deadline=10)
    c1 = PServerClient(pserver.endpoint, 1, deadline=10)
    w = np.arange(12, dtype="float32").reshape(4, 3)
    seq = LoDTensor(np.arange(5).reshape(5, 1), [[0, 3, 5]])
    c0.send_variables({"w": w, "seq": seq}, step=0)
    c1.send_variables({"emb": SelectedRows(np.array([7, 2]), np.ones((2, 2), "float32"), 10),
                       "b": np.ones(3)}, step=0)
    got = c0.get_variables(["w", "emb", "seq", "b"], min_step=0)
    np.testing.assert_array_equal(got["w"], w)
    assert got["emb"][7].tolist() == [1.0, 1.0] and got["emb"][3].tolist() == [6.0, 7.0]
    assert got["seq"].lod() == [[0, 3, 5]]
    np.testing.assert_array_equal(c1.prefetch("emb", [3, 7, 3]),
                                  [[6.0, 7.0], [1.0, 1.0], [6.0, 7.0]])
    assert c1.prefetch("emb", []).shape == (0, 2)
    for kind in ("send", "fetch"):  # both trainers must arrive before either goes on
        other = threading.Thread(target=c1.barrier, args=(kind, 0))
        other.start()
        c0.barrier(kind, 0)
        other.join(10)
    c0.checkpoint_notify("/tmp/ckpt")
    assert set(pserver.handler.checkpoints["/tmp/ckpt"]) == set(_vars())
    assert not pserver.wait_complete(0.05)
    c0.complete()
    c1.complete()
    assert pserver.wait_complete(5) and pserver.completed == {0, 1}
    assert set(pserver.handler.received) == {(0, 0), (1, 0)}


def test_get_waits_for_the_step_and_barrier_for_every_trainer(pserver):
    c0 = PServerClient(pserver.endpoint, 0, deadline=10)
    c1 = PServerClient(pserver.endpoint, 1, deadline=10)
    result = {}
    waiter = threading.Thread(target=lambda: result.update(c0.get_variables(["b"], 1)))
    waiter.start()
    c0.send_variables({"b": np.full(3, 1.0)}, step=1)
    time.sleep(0.2)
    assert waiter.is_alive()  # trainer 1 has not sent step 1 yet
    c1.send_variables({"b": np.full(3, 2.0)}, step=1)
    waiter.join(10)
    assert result["b"].tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RpcTimeout, match=r"\[trainer 0\] barrier to pserver .*trainers \[1\] "
                                         r"did not arrive"):
        c0.send_barrier(3, timeout=1.0)
    c1.complete()  # a completed trainer no longer holds the barrier
    c0.send_barrier(4, timeout=5)


def test_a_barrier_rides_on_the_send_or_get_before_it(pserver):
    """then_barrier / then_fetch_barrier: the call returns only once every trainer reached
    that barrier, as the separate barrier call would."""
    c0 = PServerClient(pserver.endpoint, 0, deadline=10)
    c1 = PServerClient(pserver.endpoint, 1, deadline=10)
    done = []
    first = threading.Thread(target=lambda: done.append(
        c0.send_variables({"b": np.full(3, 1.0)}, step=0, then_barrier=True)))
    first.start()
    time.sleep(0.2)
    assert first.is_alive() and not done  # trainer 1 has not reached the send barrier
    c1.send_barrier(0)
    first.join(10)
    assert done == [None] and pserver.handler.received[(0, 0)]["b"].tolist() == [1.0] * 3
    got = {}
    second = threading.Thread(target=lambda: got.update(
        c0.get_variables(["b"], then_fetch_barrier=0)))
    second.start()
    time.sleep(0.2)
    assert second.is_alive() and not got
    c1.get_variables(["w"], then_fetch_barrier=0)
    second.join(10)
    assert got["b"].tolist() == [1.0] * 3


def test_binds_only_the_configured_endpoint():
    port = _free_port()
    handler = InMemoryHandler(_vars(), trainers=1)
    with PServer(f"127.0.0.1:{port}", handler, trainers=1) as server:
        assert server.endpoint == f"127.0.0.1:{port}"
        with pytest.raises(ConnectionRefusedError):  # another loopback address: not bound
            socket.create_connection(("127.0.0.2", port), timeout=5).close()
        with pytest.raises(CommunicationError, match=f"could not listen on 127.0.0.1:{port}"):
            PServer(f"127.0.0.1:{port}", handler, trainers=1).start()
        with PServerClient(server.endpoint, 0, deadline=10) as client:
            assert client.get_variables(["b"])["b"].shape == (3,)
    with pytest.raises(InvalidArgumentError, match="not host:port"):
        parse_endpoint("127.0.0.1")


def test_concurrent_clients():
    trainers, steps = 6, 15
    handler = InMemoryHandler({f"w{t}": np.zeros(100, "float32") for t in range(trainers)},
                              trainers)
    errors = []

    def trainer(t):
        try:
            with PServerClient(server.endpoint, t, deadline=20) as client:
                for step in range(steps):
                    client.send_variables({f"w{t}": np.full(100, step + t, "float32")}, step)
                    got = client.get_variables([f"w{t}"])[f"w{t}"]
                    assert (got == step + t).all()
                    client.send_barrier(step)
                client.complete()
        except Exception as exc:  # reported below
            errors.append(exc)

    with PServer("127.0.0.1:0", handler, trainers) as server:
        threads = [threading.Thread(target=trainer, args=(t,)) for t in range(trainers)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(40)
        assert not errors, errors
        assert server.wait_complete(5)
    assert len(handler.received) == trainers * steps


def test_client_retries_until_a_late_server_starts():
    endpoint = f"127.0.0.1:{_free_port()}"
    result, errors = {}, []
    client = PServerClient(endpoint, 0, deadline=15)

    def call():
        try:
            result.update(client.get_variables(["b"]))
        except Exception as exc:
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.8)  # the call has been refused a few times by now
    assert caller.is_alive()
    with PServer(endpoint, InMemoryHandler(_vars(), 1), trainers=1):
        caller.join(15)
        assert not errors and result["b"].shape == (3,)


def test_retries_end_with_an_error_naming_the_endpoint():
    endpoint = f"127.0.0.1:{_free_port()}"
    # how long giving up takes is measured by bench/fault_latency.py; here, what it did: it
    # retried only within its deadline (backoff 0.05 s doubling: at most 4 sleeps fit in 0.6 s)
    with pytest.raises(PServerUnavailable, match=rf"\[trainer 1\] send_variables to pserver "
                                                 rf"{endpoint} failed: nothing answered after "
                                                 rf"[1-5] attempts over 0.6 s") as e:
        PServerClient(endpoint, 1, deadline=0.6).send_variables({"b": np.ones(3)})
    assert (e.value.endpoint, e.value.call, e.value.trainer_id) == (endpoint, "send_variables", 1)
    with pytest.raises(PServerUnavailable, match="after 3 attempts"):
        PServerClient(endpoint, 0, deadline=30, max_retries=2).complete()


def test_deadline_against_a_server_that_never_answers():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never speaks HTTP/2
    endpoint = f"127.0.0.1:{silent.getsockname()[1]}"
    try:
        # gRPC reports the unanswered handshake as UNAVAILABLE or the deadline as passed:
        # either way the call ends within its deadline, naming the endpoint
        with pytest.raises(RpcError, match=rf"get_variables to pserver {endpoint} failed: "
                                           rf"(no answer within the deadline of 0.5 s|"
                                           rf"nothing answered after \d+ attempts over 0.5 s)"):
            PServerClient(endpoint, 0, deadline=0.5).get_variables(["w"])
        # (that it ends within its deadline, by the clock: bench/fault_latency.py)
    finally:
        silent.close()


class _Stuck(PServerHandler):
    """A handler whose calls never return on their own (until the server shuts down)."""

    def __init__(self):
        self.release = threading.Event()

    def get_variables(self, trainer_id, names, min_step, timeout):
        self.release.wait(30)
        return {}

    def complete(self, trainer_id):
        raise RuntimeError("a handler bug")

    def shutdown(self):
        self.release.set()


def test_deadline_against_a_handler_that_never_returns_and_handler_bugs():
    with PServer("127.0.0.1:0", _Stuck(), trainers=1) as server:
        client = PServerClient(server.endpoint, 0, deadline=0.5)
        with pytest.raises(RpcTimeout, match="no answer within the deadline of 0.5 s"):
            client.get_variables(["w"])
        with pytest.raises(RequestRejected, match="INTERNAL: RuntimeError: a handler bug"):
            client.complete()


def test_a_pserver_that_dies_fails_the_next_call_at_once():
    server = PServer("127.0.0.1:0", InMemoryHandler(_vars(), 1), trainers=1).start()
    client = PServerClient(server.endpoint, 0, deadline=30)
    client.get_variables(["b"])
    one_request = client.bytes_sent
    server.stop(grace=None)
    with pytest.raises(PServerUnavailable, match="stopped answering"):
        client.get_variables(["b"])
    # at once: one attempt, no retry against a pserver that answered before (how soon, by the
    # clock: bench/fault_latency.py)
    assert client.bytes_sent == 2 * one_request


def _raw(endpoint, call, request: bytes):
    with grpc.insecure_channel(endpoint) as channel:
        try:
            channel.unary_unary(f"/{SERVICE}/{call}")(request, timeout=10)
        except grpc.RpcError as exc:
            return exc.code().name, exc.details()
    return "OK", ""


BAD = [  # (call, request, status, words in its error)
    ("send_variables", b"", "INVALID_ARGUMENT", "shorter than"),
    ("send_variables", pickle.dumps({"w": np.ones(3)}), "INVALID_ARGUMENT", "not an spmd frame"),
    ("send_variables", encode_frame({"w": np.ones((4, 3), "float32")},
                                    {"trainer_id": 0, "step": 0})[:-4],
     "INVALID_ARGUMENT", "truncated"),
    ("send_variables", encode_frame({"w": np.ones((4, 3), "float32")}, {"step": 0}),
     "INVALID_ARGUMENT", "no trainer_id"),
    ("complete", encode_frame({}, {"trainer_id": True}), "INVALID_ARGUMENT",
     "trainer_id is True"),
    ("send_variables", encode_frame({"w": np.ones((4, 3), "float32")},
                                    {"trainer_id": 2, "step": 0}), "OUT_OF_RANGE", "trainer id 2"),
    ("complete", encode_frame({}, {"trainer_id": -1}), "OUT_OF_RANGE", "0..1"),
    ("send_variables", encode_frame({"v": np.ones(3)}, {"trainer_id": 0, "step": 0}),
     "NOT_FOUND", "unknown variable 'v'"),
    ("send_variables", encode_frame({"w": np.ones((4, 2), "float32")},
                                    {"trainer_id": 1, "step": 0}),
     "INVALID_ARGUMENT", "expected float32 of shape [4, 3], got float32 shape [4, 2]"),
    ("send_variables", encode_frame({"emb": SelectedRows(np.array([1]), np.ones((1, 3), "f4"),
                                                         10)}, {"trainer_id": 0, "step": 0}),
     "INVALID_ARGUMENT", "variable 'emb'"),
    ("send_variables", encode_frame({}, {"trainer_id": 0, "step": "1"}),
     "INVALID_ARGUMENT", "field 'step'"),
    ("send_variables", encode_frame({}, {"trainer_id": 0, "step": 0, "then_barrier": 1}),
     "INVALID_ARGUMENT", "field 'then_barrier'"),
    ("get_variables", encode_frame({}, {"trainer_id": 0, "names": ["w"], "min_step": None,
                                        "then_fetch_barrier": "0"}),
     "INVALID_ARGUMENT", "field 'then_fetch_barrier'"),
    ("get_variables", encode_frame({}, {"trainer_id": 0, "names": ["w"], "min_step": None,
                                        "x": 1}), "INVALID_ARGUMENT", "unknown fields ['x']"),
    ("get_variables", encode_frame({"w": np.ones(2)}, {"trainer_id": 0, "names": [],
                                                       "min_step": None}),
     "INVALID_ARGUMENT", "carries values ['w']"),
    ("get_variables", encode_frame({}, {"trainer_id": 0, "names": ["nope"], "min_step": None}),
     "NOT_FOUND", "unknown variable 'nope'"),
    ("prefetch", encode_frame({"ids": np.array([1, 99])}, {"trainer_id": 0, "table": "emb"}),
     "INVALID_ARGUMENT", "ids must be in [0, 10)"),
    ("prefetch", encode_frame({"ids": np.ones(2)}, {"trainer_id": 0, "table": "emb"}),
     "INVALID_ARGUMENT", "1-D integer array"),
    ("barrier", encode_frame({}, {"trainer_id": 0, "kind": "both", "step": 0}),
     "INVALID_ARGUMENT", "one of ['send', 'fetch']"),
    ("no_such_call", encode_frame({}, {"trainer_id": 0}), "UNIMPLEMENTED", ""),
]


def test_bad_requests_are_rejected_and_logged_while_others_are_served(pserver, caplog):
    stop, served, errors = threading.Event(), [0], []

    def good_trainer():
        with PServerClient(pserver.endpoint, 1, deadline=10) as client:
            while not stop.is_set():
                try:
                    client.send_variables({"b": np.full(3, 5.0)}, step=0)
                    assert client.get_variables(["b"])["b"].tolist() == [5.0] * 3
                    served[0] += 1
                except Exception as exc:
                    errors.append(exc)
                    return

    caplog.set_level(logging.ERROR, logger="spmd.ps.rpc")
    other = threading.Thread(target=good_trainer)
    other.start()
    try:
        for call, request, status, words in BAD:
            got, details = _raw(pserver.endpoint, call, request)
            assert (got, call) == (status, call) and words in details, (call, got, details)
    finally:
        stop.set()
        other.join(20)
    assert not errors and served[0] > 0
    logged = [r.getMessage() for r in caplog.records if r.name == "spmd.ps.rpc"]
    assert len(logged) == len(BAD) - 1  # the unknown method never reaches the server's code
    assert all(f"pserver {pserver.endpoint}: " in line for line in logged)
    assert any("send_variables from trainer 2 " in line and "out of range" in line
               for line in logged)
    with PServerClient(pserver.endpoint, 0, deadline=10) as client:  # still serving
        assert client.prefetch("emb", [0]).tolist() == [[0.0, 1.0]]


def test_client_errors_name_the_call_and_trainer(pserver):
    client = PServerClient(pserver.endpoint, 1, deadline=10)
    with pytest.raises(RequestRejected, match=r"\[trainer 1\] send_variables to pserver "
                                              r"127\.0\.0\.1:\d+ failed: NOT_FOUND: unknown "
                                              r"variable 'w@GRAD'") as err:
        client.send_variables({"w@GRAD": np.ones((4, 3), "float32")})
    assert err.value.code == "NOT_FOUND"
    small = PServerClient(pserver.endpoint, 0, deadline=10, max_message_bytes=1000)
    with pytest.raises(RequestRejected, match="RESOURCE_EXHAUSTED.*slice_var_up"):
        small.send_variables({"w": np.zeros((100, 100), "float32")})


def test_deadline_defaults_to_the_flag(monkeypatch):
    monkeypatch.setenv("SPMD_PS_RPC_DEADLINE", "7.5")
    assert PServerClient("127.0.0.1:1", 0).deadline == 7.5
    monkeypatch.setenv("SPMD_PS_RPC_DEADLINE", "0")
    with pytest.raises(InvalidArgumentError, match="SPMD_PS_RPC_DEADLINE"):
        PServerClient("127.0.0.1:1", 0)


def test_import_spmd_does_not_load_grpc():
    code = ("import sys, spmd, spmd.fluid, spmd.ps, spmd.ps.wire, spmd.ps.rpc; "
            "print('grpc' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
