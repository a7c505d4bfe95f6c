"""The Dataset API in parameter-server mode: a pserver and two trainers on localhost (fluid
1.8's DistributeTranspiler job of tests/dataset_api_model.py's model in sync mode, each role a
process of tests/unit/dataset_api_ps_role.py under a timeout), each trainer running its
transpiled program with Executor.train_from_dataset over an InMemoryDataset of its own file,
end with the parameters of one process trained over the union, batch k being both trainers'
batch k, from the pserver's initial values."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import dataset_api_model as model
import numpy as np
import pytest
from ps_jobs import free_ports, role_env

pytest.importorskip("grpc")
pytestmark = pytest.mark.timeout(200)
SCRIPT = pathlib.Path(__file__).resolve().parent / "dataset_api_ps_role.py"
TIMEOUT_S = 120
BATCH, STEPS = 8, 2


def _run_roles(tmp, files):
    endpoint = f"127.0.0.1:{free_ports(1)[0]}"
    base = dict(os.environ, PADDLE_PSERVERS_IP_PORT_LIST=endpoint, PADDLE_TRAINERS_NUM="2",
                SPMD_PS_RPC_DEADLINE="30", SPMD_PS_IDLE_TIMEOUT="45", PYTHONUNBUFFERED="1")
    roles = {"ps0": role_env("PSERVER", 0, [endpoint])}
    roles.update({f"t{i}": role_env("TRAINER", i, [endpoint]) for i in range(2)})
    procs = {}
    for name, env in roles.items():
        log = open(tmp / f"{name}.log", "w")  # noqa: SIM115 - closed below
        procs[name] = (subprocess.Popen(
            [sys.executable, str(SCRIPT), "--files", ",".join(files), "--out",
             str(tmp / f"{name}.npz")], env=dict(base, **env), stdout=log,
            stderr=subprocess.STDOUT), log)
    try:
        for proc, _ in procs.values():
            proc.wait(TIMEOUT_S)
    finally:
        for proc, log in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            log.close()
    logs = {n: (tmp / f"{n}.log").read_text() for n in procs}
    bad = {n: p.returncode for n, (p, _) in procs.items() if p.returncode != 0}
    assert not bad, f"roles failed {bad}\n" + "\n".join(f"--- {n}\n{t[-3000:]}"
                                                         for n, t in logs.items())
    return logs


def test_trainers_on_datasets_equal_one_process(tmp_path):
    lines = [model.multislot_line(r) for r in model.rows(3, 2 * BATCH * STEPS)]
    halves = [lines[:BATCH * STEPS], lines[BATCH * STEPS:]]
    files = []
    for i, half in enumerate(halves):
        files.append(str(tmp_path / f"part{i}.txt"))
        pathlib.Path(files[-1]).write_text("".join(half))
    logs = _run_roles(tmp_path, files)
    for t in ("t0", "t1"):  # print_period=1: each trainer printed the loss of each batch
        assert logs[t].count("loss\tmean_0.tmp_0") == STEPS
    # one process: batch k of 2 * BATCH records is trainer 0's batch k, then trainer 1's
    union = tmp_path / "union.txt"
    union.write_text("".join(line for k in range(STEPS) for h in halves
                             for line in h[k * BATCH:(k + 1) * BATCH]))
    init = dict(np.load(tmp_path / "ps0.npz.init.npz"))
    subprocess.run([sys.executable, str(SCRIPT), "--files", str(union), "--batch",
                    str(2 * BATCH), "--out", str(tmp_path / "local.npz"), "--init",
                    str(tmp_path / "ps0.npz.init.npz")], check=True, timeout=TIMEOUT_S,
                   env=dict(os.environ, PADDLE_TRAINING_ROLE="LOCAL"))
    local, served = (dict(np.load(tmp_path / f"{n}.npz")) for n in ("local", "ps0"))
    for name in model.PARAMS:
        assert np.abs(local[name] - init[name]).max() > 1e-4, f"{name} did not train"
        np.testing.assert_allclose(served[name], local[name], rtol=1e-5, atol=1e-6,
                                   err_msg=f"pserver's {name} vs one process")
    for t in ("t0", "t1"):  # each trainer holds the parameters it received last
        trained = dict(np.load(tmp_path / f"{t}.npz"))
        np.testing.assert_array_equal(trained["fc_0.w_0"], served["fc_0.w_0"])
