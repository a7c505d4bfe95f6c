"""Only this job's trainers get into a pserver (issue 23 item 8): with a job token every call
carries its hello in the metadata and the server checks it before decoding the request; a
call without it or with another job's is refused (PERMISSION_DENIED) and logged, garbage bytes
and a truncated hello at the port do no harm, and the job's own calls go on unchanged."""
from __future__ import annotations

import socket

import numpy as np
import pytest

from spmd.job_token import hello
from spmd.ps.handler import InMemoryHandler
from spmd.ps.rpc import PServer, PServerClient, RequestRejected

grpc = pytest.importorskip("grpc")
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def pserver():
    handler = InMemoryHandler({"w": np.zeros(3, "float32")}, trainers=1)
    with PServer("127.0.0.1:0", handler, trainers=1, max_wait_s=10, token="ours") as server:
        yield server


def _raw(endpoint: str, data: bytes) -> None:
    host, port = endpoint.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(data)
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass  # the server closed or reset it: refused


def test_only_this_jobs_calls_get_in(pserver, caplog):
    ours = PServerClient(pserver.endpoint, 0, deadline=10, token="ours")
    ours.send_variables({"w": np.ones(3, "float32")}, step=0)
    for token in ("theirs", None):
        stranger = PServerClient(pserver.endpoint, 0, deadline=5, token=token)
        with pytest.raises(RequestRejected, match="PERMISSION_DENIED.*another job.*"
                                                  "SPMD_JOB_TOKEN"):
            stranger.send_variables({"w": np.full(3, 9.0, "float32")}, step=0)
        stranger.close()
    _raw(pserver.endpoint, b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)))  # garbage
    _raw(pserver.endpoint, hello("theirs", "pserver")[:20])  # a truncated hello
    assert pserver.refused == 2
    assert "refused a call to /spmd.ps.PServer/send_variables" in caplog.text
    # the strangers' values never reached the handler; the job goes on unchanged
    assert list(pserver.handler.received) == [(0, 0)]
    np.testing.assert_array_equal(ours.get_variables(["w"], min_step=0)["w"], np.ones(3))
    ours.close()


def test_without_a_token_any_caller_is_admitted(monkeypatch):
    monkeypatch.delenv("SPMD_JOB_TOKEN", raising=False)
    handler = InMemoryHandler({"w": np.zeros(3, "float32")}, trainers=1)
    with PServer("127.0.0.1:0", handler, trainers=1, max_wait_s=10) as server:
        client = PServerClient(server.endpoint, 0, deadline=10)
        client.send_variables({"w": np.ones(3, "float32")}, step=0)
        assert server.refused == 0 and list(handler.received) == [(0, 0)]
        client.close()
