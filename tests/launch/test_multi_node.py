"""paddle-launch on each of two emulated nodes (tests/launch/netns.py): the same command on
both, or PaddleCloud's variables, forms one MPI job of 2 x 2 ranks that trains what
`mpiexec -n 4` trains on one node; a trainer raising on node 1, and a node that never starts,
end the job naming the rank or the node, as does a node whose MPI proxy fails after it joined;
nothing is left running in either namespace; and
connections that are not this job's (garbage, a truncated hello, another job's token) are
refused by the rendezvous and by the supervisors' channel while the job runs, which trains
the same.

Needs root (network namespaces): skipped, with the reason, elsewhere.
"""
from __future__ import annotations

import os
import re
import signal
import time

import pytest
from launch_helpers import PYTHON, SCRIPTS, processes_with
from multi_node_helpers import (
    LAST_STEP,
    TRAIN,
    finish,
    intrude,
    launch_cmd,
    listening_port,
    one_node_reference,
    results,
    start,
)
from netns import left_in, skip_reason, two_nodes

STEPS = 5
REFERENCE = [TRAIN, "--steps", str(STEPS)]


@pytest.fixture
def nodes():
    reason = skip_reason()
    if reason:
        print(reason)
        pytest.skip(reason)
    with two_nodes() as pair:
        yield pair
        assert not left_in(pair), f"left running in the emulated nodes: {left_in(pair)}"


def _run_both(nodes, tmp_path, token, *script, timeout=180, **extra):
    log = tmp_path / "log"
    procs = [start(n, launch_cmd(nodes, n, log, *script), token, **extra) for n in nodes]
    results = [finish(p, timeout) for p in procs]
    return results, log


def test_paddle_launch_on_each_node_is_one_job(nodes, tmp_path, token):
    ((rc0, out0), (rc1, out1)), _ = _run_both(nodes, tmp_path, token, *REFERENCE)
    assert rc0 == 0 and rc1 == 0, out0[-4000:] + out1[-2000:]
    log = tmp_path / "log"
    # one job: 4 ranks of one world, each started once
    for rank in range(4):
        status = (log / f"workerstatus.{rank}").read_text()
        assert status.count(" start ") == 1, status
        host = re.search(r"host=(\S+)", status).group(1)
        assert host == nodes[rank // 2].host, (rank, host)
    assert results(log, 4) == one_node_reference(REFERENCE, token)
    assert "rank 0/4 trained" in out0  # rank 0's output on node 0's console
    assert "node 1 (10.77.0.2) joined the job" in out1
    assert "could not all reach rank 0's" not in out0  # the guard's channel across hosts


def test_paddlecloud_variables(nodes, tmp_path, token):
    log = tmp_path / "log"
    endpoints = ",".join(f"{n.ip}:{p}" for n in nodes for p in (6170, 6171))
    procs = []
    for n in nodes:
        env = {"PADDLE_TRAINERS": ",".join(m.ip for m in nodes), "POD_IP": n.ip,
               "PADDLE_TRAINER_ID": str(n.index), "PADDLE_PORT": "6170",
               "TRAINER_PORTS_NUM": "2", "DISTRIBUTED_TRAINER_ENDPOINTS": endpoints}
        cmd = [PYTHON, "-m", "launch", "--log_dir", str(log), "--join_timeout", "60",
               *REFERENCE]
        procs.append(start(n, cmd, token, **env))
    (rc0, out0), (rc1, out1) = [finish(p, 180) for p in procs]
    assert rc0 == 0 and rc1 == 0, out0[-4000:] + out1[-2000:]
    assert "nodes from PaddleCloud's PADDLE_TRAINERS and POD_IP" in out0
    assert results(log, 4) == one_node_reference(REFERENCE, token)


def test_a_trainer_raising_on_node_1_ends_the_job(nodes, tmp_path, token):
    script = [str(SCRIPTS / "crash.py"), "--mode", "raise", "--rank", "2", "--step", "1"]
    ((rc0, out0), (rc1, out1)), _ = _run_both(nodes, tmp_path, token, *script, timeout=120)
    assert rc0 != 0 and rc1 != 0, out0[-4000:] + out1[-2000:]
    assert "ZeroDivisionError: rank 2 failed on purpose" in out0, out0[-4000:]
    assert re.search(r"rank 2 on node1-\w+: \[root cause\]", out0), out0[-4000:]
    # node 1 names its own failed rank too (node 0 may not share its file system)
    assert "rank 2: ZeroDivisionError: rank 2 failed on purpose" in out1, out1[-3000:]


def test_a_node_that_never_starts_is_named(nodes, tmp_path, token):
    log = tmp_path / "log"
    proc = start(nodes[0], launch_cmd(nodes, nodes[0], log, TRAIN, join_timeout=8), token)
    rc, out = finish(proc, 90)
    assert rc != 0, out[-3000:]
    assert "node 1 (10.77.0.2) never joined the job within --join_timeout 8 s" in out, out
    # and the other way round: node 0 never started
    proc = start(nodes[1], launch_cmd(nodes, nodes[1], log, TRAIN, join_timeout=4), token)
    rc, out = finish(proc, 60)
    assert rc != 0, out[-3000:]
    assert "could not reach node 0's paddle-launch at 10.77.0.1:6170 within 4 s" in out, out


def test_strangers_are_refused_while_the_job_runs(nodes, tmp_path, token):
    log = tmp_path / "log"
    script = [str(SCRIPTS / "crash.py"), "--mode", "ok", "--steps", "300"]  # 0.05 s a step
    node0 = start(nodes[0], launch_cmd(nodes, nodes[0], log, *script), token)
    # the rendezvous: node 0 listens before node 1 came
    listening_port(nodes[0], port=6170)
    answers = intrude(nodes[1], nodes[0].ip, 6170, "rendezvs", token)
    assert answers.split() == ["refused"] * 3, answers
    node1 = start(nodes[1], launch_cmd(nodes, nodes[1], log, *script), token)
    # the supervisors' channel: rank 0's supervisor, once the job runs
    status, supervisor = log / "workerstatus.0", None
    deadline = time.monotonic() + 60
    while supervisor is None and time.monotonic() < deadline:
        match = re.search(r"supervisor=(\d+)", status.read_text() if status.exists() else "")
        supervisor = int(match.group(1)) if match else None
        time.sleep(0.1)
    assert supervisor, "rank 0's supervisor never started"
    port = listening_port(nodes[0], supervisor)
    answers = intrude(nodes[1], nodes[0].ip, port, "channel", token)
    assert answers.split() == ["refused"] * 3, answers
    (rc0, out0), (rc1, out1) = finish(node0, 180), finish(node1, 60)
    assert rc0 == 0 and rc1 == 0, out0[-4000:] + out1[-2000:]
    assert out0.count("spmd: refused a connection to paddle-launch's rendezvous") == 3, out0
    refusals = (log / "mpi.log").read_text()  # the supervisors' stderr goes to mpiexec
    assert refusals.count("refused a connection to the supervisors' channel") == 3, refusals
    assert results(log, 4, LAST_STEP) == one_node_reference(script, token, LAST_STEP)


def test_a_node_whose_proxy_fails_after_joining_is_named(nodes, tmp_path, token):
    """Node 1 joined and its ranks run; then its MPI proxy dies (SIGKILL, as the OOM killer
    would): node 1's paddle-launch tells node 0, which fails the job naming the node."""
    log = tmp_path / "log"
    script = [str(SCRIPTS / "crash.py"), "--mode", "ok", "--steps", "2000"]  # 0.05 s a step
    procs = [start(n, launch_cmd(nodes, n, log, *script), token) for n in nodes]
    deadline = time.monotonic() + 90
    status = log / "workerstatus.2"  # node 1's first rank
    while " start " not in (status.read_text() if status.exists() else "") and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    proxies = [int(line.split()[0]) for line in processes_with(token)
               if "hydra_pmi_proxy" in line and "--proxy-id 1 " in line + " "]
    assert len(proxies) == 1, processes_with(token)
    os.kill(proxies[0], signal.SIGKILL)
    (rc0, out0), (rc1, out1) = [finish(p, 120) for p in procs]
    assert rc0 != 0 and rc1 != 0, out0[-4000:] + out1[-2000:]
    assert "paddle-launch: the job failed: node 1 (10.77.0.2): its MPI proxy (hydra_pmi_proxy) " \
           "failed after the node joined (killed by signal 9), so its ranks 2-3 are gone" in out0, \
        out0[-4000:]
    assert "this node's MPI proxy failed (killed by signal 9" in out1, out1[-3000:]
    assert "node 0 was told" in out1, out1[-3000:]
