"""fluid.incubate.fleet.base.role_maker.GeneralRoleMaker: two trainers and one pserver, three
processes started with the PaddleCloud variables, take their roles and meet through a shared
folder: the trainers' all_reduce sums among them only, all_gather spans every process in
endpoint order, barriers hold; the unsupported stores are refused."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from spmd.errors import InvalidArgumentError
from spmd.fluid.incubate.fleet.base.role_maker import GeneralRoleMaker

WORKERS = ["127.0.0.1:6201", "127.0.0.1:6202"]
SERVERS = ["127.0.0.1:6301"]

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from spmd.fluid.incubate.fleet.base.role_maker import GeneralRoleMaker
    role = GeneralRoleMaker(path=sys.argv[1], run_timeout_seconds=60)
    role.generate_role()
    out = np.zeros(2)
    role.all_reduce_worker(np.array([role.worker_index() + 1.0, 10.0]), out)
    high = np.zeros(2)
    role._all_reduce(np.array([role.server_index() * 1.0, 3.0]), high, mode="max")
    gathered = role.all_gather(role.get_local_endpoint())
    role.barrier_worker()
    role.barrier_all()
    print("RESULT " + json.dumps({
        "worker": role.is_worker(), "server": role.is_server(), "index": role.worker_index(),
        "num": role.worker_num(), "first": role.is_first_worker(), "sum": out.tolist(),
        "max": high.tolist(), "gathered": gathered,
        "pservers": role.get_pserver_endpoints()}))
""")


def _start(tmp_path, extra):
    env = dict(os.environ, SPMD_ENV_START="0", PADDLE_TRAINER_ENDPOINTS=",".join(WORKERS),
               PADDLE_PSERVERS_IP_PORT_LIST=",".join(SERVERS), **extra)
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path / "store")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _result(proc):
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out[-3000:]
    line = [ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def test_trainers_and_pserver_meet_through_the_folder(tmp_path):
    procs = [_start(tmp_path, {"TRAINING_ROLE": "TRAINER", "PADDLE_TRAINER_ID": str(i)})
             for i in range(2)]
    procs.append(_start(tmp_path, {"TRAINING_ROLE": "PSERVER", "POD_IP": "127.0.0.1",
                                   "PADDLE_PORT": "6301"}))
    try:
        t0, t1, ps = (_result(p) for p in procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert (t0["worker"], t0["index"], t0["first"], t1["index"], t1["first"]) == (
        True, 0, True, 1, False)
    assert ps["server"] and not ps["worker"]
    assert t0["num"] == t1["num"] == ps["num"] == 2
    assert t0["sum"] == t1["sum"] == [3.0, 20.0]  # 1 + 2 and 10 + 10: trainers only
    assert ps["sum"] == [0.0, 0.0]  # a pserver takes no part in all_reduce_worker
    assert ps["max"] == [0.0, 3.0]  # the pservers' own group (one member)
    assert t0["gathered"] == t1["gathered"] == ps["gathered"] == WORKERS + SERVERS
    assert t0["pservers"] == SERVERS


def test_unsupported_stores_and_missing_variables(monkeypatch):
    with pytest.raises(InvalidArgumentError, match="http_ip_port"):
        GeneralRoleMaker(path="/x", http_ip_port="127.0.0.1:8000")
    with pytest.raises(InvalidArgumentError, match="HDFS store"):
        GeneralRoleMaker(path="/x", hdfs_name="hdfs://nn:9000", hdfs_ugi="u,p")
    for name in ("PADDLE_PSERVERS_IP_PORT_LIST", "TRAINING_ROLE", "PADDLE_TRAINER_ENDPOINTS"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(InvalidArgumentError, match="is not set"):
        GeneralRoleMaker(path="/x").generate_role()
