"""No pickle crosses any network path or a checkpoint load (issue 25 item 7).

Each path gets a pickle that would run code when loaded (tests/no_pickle.py's detonator: it
makes a directory) where its peer's bytes go, after this job's hello where the path has one, so
the payload reaches the decoder: it is refused, the directory is never made, and, with pickling
forbidden and recorded meanwhile, nothing was pickled or unpickled, also by the ordinary traffic
that follows. MPI's collectives are covered under mpiexec (tests/dist/mpi/test_comm.py)."""
from __future__ import annotations

import ast
import os
import pathlib
import socket
import threading
import time
import zipfile

import numpy as np
import pytest

from tests.no_pickle import detonator, forbid_pickle, looks_like_a_pickle

pytestmark = pytest.mark.timeout(60)
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def mark(tmp_path):
    path = tmp_path / "the_pickle_ran"
    yield path
    assert not path.exists(), f"a pickle was loaded: {path} was made"


def _pump(channels, until, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not until() and time.monotonic() < deadline:
        for c in channels:
            c.poll(0.01)
    assert until()


def test_the_pserver_refuses_a_pickled_request(mark):
    grpc = pytest.importorskip("grpc")
    from spmd.ps.handler import InMemoryHandler
    from spmd.ps.rpc import SERVICE, PServer, PServerClient
    from spmd.ps.wire import encode_frame

    handler = InMemoryHandler({"w": np.zeros(3, "float32")}, trainers=1)
    with forbid_pickle() as guard, PServer("127.0.0.1:0", handler, trainers=1,
                                           max_wait_s=10) as server:
        with grpc.insecure_channel(server.endpoint) as channel:
            call = channel.unary_unary(f"/{SERVICE}/send_variables")
            with pytest.raises(grpc.RpcError) as refused:
                call(detonator(mark), timeout=10)
        assert refused.value.code().name == "INVALID_ARGUMENT"
        assert "not an spmd frame" in refused.value.details()
        client = PServerClient(server.endpoint, 0, deadline=10)
        client.send_variables({"w": np.ones(3, "float32")}, step=0)
        np.testing.assert_array_equal(client.get_variables(["w"])["w"], np.ones(3))
    assert guard.calls == []
    frame = encode_frame({"w": np.ones(3, "float32")}, {"trainer_id": 0, "step": 0})
    assert frame[:4] == b"SPW1" and not looks_like_a_pickle(frame)


def test_the_supervisors_channel_refuses_a_pickled_hello_line(monkeypatch, mark, capsys):
    from spmd.guard import channel as ch
    from spmd.job_token import hello

    monkeypatch.delenv("SPMD_JOB_TOKEN", raising=False)
    with forbid_pickle() as guard:
        listener = ch.listen(env={"MPI_LOCALNRANKS": "2", "PMI_SIZE": "2"})
        port = listener.getsockname()[1]
        seen = []
        root = ch.Channel(0, 2, listener, seen.append)
        addresses = ch.candidate_addresses(port, env={})
        token = addresses.split("token=")[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(hello(token, "channel") + b"hello " + detonator(mark) + b"\n")
        _pump([root], lambda: root.refused == 1)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(hello(token, "channel") + detonator(mark))  # lines that mean nothing
        for _ in range(50):
            root.poll(0.01)
        assert root.peers_connected == 0 and not seen
        one = ch.Channel(1, 2, None, lambda info: None)
        assert one.connect(addresses)
        _pump([root, one], lambda: root.peers_connected == 1)
        one.leave({"code": 0, "signal": 0, "collectives": 1, "steps": 1, "how": 1})
        _pump([root, one], lambda: bool(seen))
        assert seen[0]["rank"] == 1
        for c in (root, one):
            c.close()
    assert guard.calls == []
    assert "a bad hello line" in capsys.readouterr().err


def test_the_join_point_refuses_a_pickled_hello_and_reply(mark):
    from spmd.comm import join as jn
    from spmd.comm import join_point as jp

    key, _ = jp.job_key({"SPMD_JOB_TOKEN": "secret"})
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    env = {"PADDLE_TRAINER_ID": "0", "PADDLE_TRAINERS_NUM": "2",
           "PADDLE_TRAINER_ENDPOINTS": f"127.0.0.1:{port},127.0.0.1:{port + 1}",
           "PADDLE_CURRENT_ENDPOINT": f"127.0.0.1:{port}", "SPMD_JOB_TOKEN": "secret",
           "SPMD_JOIN_TIMEOUT": "20"}
    refused: list[str] = []
    kept = []

    def pickle_then_trainer():
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.recv(jp.NONCE)
            payload = detonator(mark)
            s.sendall(payload + b"\0" * max(0, jp.HELLO - len(payload)))
            time.sleep(0.2)
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        hello, _ = jp.pack_hello(key, sock.recv(jp.NONCE), 1, 2, jp.HERE)
        sock.sendall(hello)
        kept.append(sock)

    with forbid_pickle() as guard:
        gathering = jn.Gathering(jn.Spec(env), listener, on_refused=refused.append)
        thread = threading.Thread(target=pickle_then_trainer)
        thread.start()
        gathering.run(time.monotonic() + 15)
        thread.join()
        try:
            assert sorted(gathering.joiners) == [1]
            assert "not this job's hello" in "\n".join(refused)
        finally:
            for sock in kept:
                sock.close()
            gathering.close()
        # the joiner's end: a reply that is a pickle does not verify
        head = detonator(mark)[:jp.REPLY_HEAD]
        assert jp.check_reply(key, jp.new_nonce(), head, detonator(mark)) is None
    assert guard.calls == []


def test_the_rendezvous_refuses_a_pickled_request(mark, capsys):
    from launch.config import LaunchConfig
    from launch.rendezvous import RendezvousServer, fetch_part
    from spmd.job_token import hello

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def config(node_ip):
        return LaunchConfig("train.py", nproc_per_node=1, started_port=port,
                            cluster_node_ips=["127.0.0.1", "127.0.0.2"], node_ip=node_ip,
                            join_timeout=5)

    parts = {1: {"proxy": ["hydra_pmi_proxy"], "ranks": [1]}}
    with forbid_pickle() as guard:
        server = RendezvousServer(config("127.0.0.1"), "job-a", parts)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(hello("job-a", "rendezvs") + detonator(mark) + b"\n")
                s.settimeout(8)
                assert s.recv(100) == b""  # refused: closed without an answer
            assert fetch_part(config("127.0.0.2"), "job-a", time.monotonic() + 5) == parts[1]
            assert server.refused == 1 and server.missing() == []
        finally:
            server.close()
    assert guard.calls == []
    assert "a bad request" in capsys.readouterr().err


def test_the_nas_controller_server_drops_a_pickled_request(mark):
    from spmd.fluid.contrib.slim.nas import ControllerServer, SearchAgent
    from spmd.fluid.contrib.slim.searcher import SAController

    np.random.seed(0)
    controller = SAController(init_temperature=10)
    controller.reset([5, 5], [1, 2])
    with forbid_pickle() as guard:
        server = ControllerServer(controller, key="k", timeout=0.5, search_steps=None)
        server.start()
        try:
            for payload in (detonator(mark) + b"\n", b"k\t" + detonator(mark) + b"\t1\n"):
                with socket.create_connection((server.ip(), server.port()), timeout=5) as s:
                    s.sendall(payload)
                    s.shutdown(socket.SHUT_WR)
                    assert s.recv(1024) == b""  # dropped
            assert controller.iteration == 0
            SearchAgent(server.ip(), server.port(), key="k").update([3, 4], 0.5)
            assert controller.iteration == 1
        finally:
            server.close()
    assert guard.calls == []


def _pickled_npy(path: pathlib.Path, mark) -> None:
    class Boom:
        def __reduce__(self):
            return os.mkdir, (str(mark),)

    np.save(path, np.array([Boom()], dtype=object), allow_pickle=True)


def test_checkpoint_loads_refuse_pickles_without_loading_them(tmp_path, mark):
    import spmd.fluid as fluid
    from spmd.errors import InvalidArgumentError

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        fluid.layers.create_parameter([2], "float32", name="w")
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        fluid.io.save_persistables(exe, str(tmp_path / "vars"), main)
    _pickled_npy(tmp_path / "vars" / "w.npy", mark)
    (tmp_path / "m.pdparams").write_bytes(detonator(mark))
    _pickled_npy(tmp_path / "member.npy", mark)
    with zipfile.ZipFile(tmp_path / "all.npz", "w") as archive:  # one file for every var
        archive.write(tmp_path / "member.npy", "w.npy")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "__model__").write_bytes(detonator(mark))  # fluid's is protobuf
    with forbid_pickle() as guard, fluid.scope_guard(scope):
        with pytest.raises(InvalidArgumentError, match="pickle"):
            fluid.io.load_persistables(exe, str(tmp_path / "vars"), main)
        with pytest.raises(InvalidArgumentError, match="pickled data"):
            fluid.io.load_program_state(str(tmp_path / "m"))
        with pytest.raises(InvalidArgumentError, match="pickle"):
            fluid.load(main, str(tmp_path / "m"))
        with pytest.raises(InvalidArgumentError, match="pickle"):
            fluid.io.load_vars(exe, str(tmp_path), main, vars=[main.global_block().var("w")],
                               filename="all.npz")
        with pytest.raises(InvalidArgumentError):
            fluid.io.load_inference_model(str(tmp_path / "model"), exe)
    assert guard.calls == []


def test_multiprocess_reader_samples_cross_without_pickle():
    """Forked readers' samples come back over their pipes as JSON headers plus raw array
    bytes, with their types (a tuple, an array, a numpy scalar) intact."""
    from spmd.reader.multiprocess import multiprocess_reader

    def part(k):
        return lambda: iter([(k, np.full(2, k, "int64"), np.float32(k) / 2)])

    with forbid_pickle() as guard:
        samples = sorted(multiprocess_reader([part(0), part(1)])(), key=lambda s: s[0])
    assert guard.calls == []
    assert [type(s) for s in samples] == [tuple, tuple]
    np.testing.assert_array_equal(samples[1][1], [1, 1])
    assert samples[1][2] == np.float32(0.5) and type(samples[1][2]) is np.float32


# every module that reads a peer's bytes or a checkpoint: none may import a pickler
_NETWORK_AND_LOAD = ["spmd/comm", "spmd/guard", "spmd/ps", "spmd/io", "spmd/job_token.py",
                     "spmd/reader/multiprocess.py", "spmd/datafeed/shuffle.py",
                     "spmd/executor/fingerprint.py", "spmd/fluid/contrib/slim/nas",
                     "spmd/fluid/dygraph/checkpoint.py", "launch"]
_PICKLERS = {"pickle", "_pickle", "cPickle", "cloudpickle", "dill", "joblib", "shelve",
             "marshal", "copyreg", "multiprocessing.reduction"}


def _modules():
    for entry in _NETWORK_AND_LOAD:
        path = ROOT / entry
        yield from (sorted(path.rglob("*.py")) if path.is_dir() else [path])


@pytest.mark.parametrize("path", list(_modules()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_network_or_load_module_imports_a_pickler(path):
    tree = ast.parse(path.read_text(), str(path))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Attribute) and node.attr == "pickle":
            # mpi4py's object serializer (MPI.pickle) and its lower-case object methods
            raise AssertionError(f"{path}:{node.lineno} reaches .pickle")
    assert not imported & _PICKLERS, f"{path} imports {sorted(imported & _PICKLERS)}"
