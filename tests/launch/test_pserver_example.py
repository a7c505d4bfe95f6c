"""examples/pserver/train.py (a CTR-style DistributeTranspiler job, sparse embedding) under
`paddle-launch --server_num 2 --worker_num 2`, in sync and async mode: it exits 0 within its
deadline, every role logs, and each trainer's loss falls (mean of the last steps below the
mean of the first). The `token` fixture checks that no process outlives the test."""
from __future__ import annotations

import re

import pytest
from launch_helpers import ROOT, launcher, run

pytest.importorskip("grpc")

SCRIPT = str(ROOT / "examples" / "pserver" / "train.py")
DEADLINE_S = 120
PS_ENV = {"SPMD_PS_RPC_DEADLINE": "30", "SPMD_PS_IDLE_TIMEOUT": "45"}
SUMMARY = re.compile(r"trainer (\d+): mean loss of the first \d+ steps ([\d.]+), "
                     r"of the last \d+ ([\d.]+)")


@pytest.mark.timeout(2 * DEADLINE_S)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_pserver_example_trains(tmp_path, token, mode):
    log = tmp_path / "log"
    extra = ["--async"] if mode == "async" else []
    res = run(launcher("--server_num", "2", "--worker_num", "2", "--log_dir", str(log),
                       SCRIPT, "--steps", "80", *extra), token, timeout=DEADLINE_S, **PS_ENV)
    assert res.returncode == 0, res.output[-4000:]
    for i in (0, 1):
        server = (log / f"serverlog.{i}").read_text()
        assert f"serving ({mode} mode, 2 trainers)" in server and ": done" in server, server
        worker = (log / f"workerlog.{i}").read_text()
        found = SUMMARY.findall(worker)
        assert len(found) == 1 and found[0][0] == str(i), worker[-2000:]
        first, last = float(found[0][1]), float(found[0][2])
        assert last < first, f"trainer {i} ({mode}): loss {first} -> {last}\n{worker}"
