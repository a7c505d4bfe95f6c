"""Trainers started with fluid's PADDLE_* variables only (one plain process per trainer, no
launcher) across two emulated nodes (tests/launch/netns.py): each trainer runs in its node's
namespace, its endpoint that node's 10.77.0.x address, and the trainers join one world at
trainer 0's endpoint (spmd/comm/join.py) with a shared SPMD_JOB_TOKEN. 2 trainers (one per
node) and 3 (two on node 0, one on node 1) train what `mpiexec -n N` trains on one node; a
trainer on node 1 raising before, or after, the first collective ends the job non-zero, naming
it; every process ends and nothing is left in either namespace.

Needs root (network namespaces): skipped, with the reason, elsewhere. One pair of namespaces
serves the whole module.
"""
from __future__ import annotations

import subprocess
import time

import pytest
from launch_helpers import PYTHON, ROOT, SCRIPTS, base_env
from netns import left_in, skip_reason, two_nodes
from test_env_only_start import mpiexec_lines, results_lines

SCRIPT = str(SCRIPTS / "env_only_train.py")
BOUND_S = 150
SECRET = "the two nodes' shared secret"


@pytest.fixture(scope="module")
def pair():
    reason = skip_reason()
    if reason:
        print(reason)
        pytest.skip(reason)
    with two_nodes() as nodes:
        yield nodes


@pytest.fixture
def nodes(pair):
    yield pair
    deadline = time.monotonic() + 10  # the trainers' own mpiexec may still be reaping
    while left_in(pair) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = left_in(pair)
    for node in pair:  # clean for the next test, then fail this one
        for proc in node.procs:
            if proc.poll() is None:
                proc.kill()
        node.procs.clear()
    assert not left, f"left running in the emulated nodes: {left}"


def start_trainers(nodes, placement: list[int], script: list[str], token: str,
                   **env: str) -> dict[int, subprocess.Popen]:
    """Trainer i as a plain process on node placement[i], its endpoint that node's address."""
    endpoints = [f"{nodes[n].ip}:{6270 + i}" for i, n in enumerate(placement)]
    procs = {}
    for trainer, n in enumerate(placement):
        variables = base_env(token, PADDLE_TRAINER_ID=str(trainer),
                             PADDLE_TRAINERS_NUM=str(len(placement)),
                             PADDLE_TRAINER_ENDPOINTS=",".join(endpoints),
                             PADDLE_CURRENT_ENDPOINT=endpoints[trainer],
                             SPMD_JOB_TOKEN=SECRET, **env)
        procs[trainer] = nodes[n].popen(
            [PYTHON, *script], variables, cwd=ROOT, text=True, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return procs


def wait_all(procs: dict[int, subprocess.Popen]) -> dict[int, tuple[int, str]]:
    """trainer -> (exit code, output); every trainer ended within BOUND_S."""
    deadline = time.monotonic() + BOUND_S
    results = {}
    for trainer, proc in sorted(procs.items()):
        try:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs.values():
                p.kill()
            texts = {t: p.communicate()[0][-2000:] for t, p in procs.items()}
            raise AssertionError(f"trainer {trainer} still running after {BOUND_S} s: "
                                 f"{texts}") from None
        results[trainer] = (proc.returncode, out)
    return results


@pytest.mark.parametrize("placement, mode", [([0, 1], "allreduce"), ([0, 0, 1], "reduce")],
                         ids=["2-trainers-1-per-node", "3-trainers-2-on-node-0"])
def test_env_only_trainers_across_nodes_train_what_mpiexec_trains(nodes, placement, mode,
                                                                 token, tmp_path):
    n = len(placement)
    extra = ["--reduce"] if mode == "reduce" else []
    results = wait_all(start_trainers(
        nodes, placement, [SCRIPT, "--ckpt", str(tmp_path / "ckpt"), *extra], token))
    for trainer, (code, text) in results.items():
        assert code == 0, f"trainer {trainer} on node {placement[trainer]}:\n{text[-3000:]}"
        assert f"rank {trainer}/{n} checksum" in text  # rank = trainer id
    env_only = sorted(line for _, text in results.values() for line in results_lines(text))
    assert env_only == mpiexec_lines(n, ["--ckpt", str(tmp_path / "ckpt1"), *extra], token)
    checksums = {line.split()[-1] for line in env_only if "checksum" in line}
    assert len(checksums) == 1  # the same parameters on every trainer, on both nodes


def test_a_trainer_on_node_1_raising_before_the_first_collective(nodes, token):
    results = wait_all(start_trainers(nodes, [0, 1], [SCRIPT, "--fault", "raise"], token))
    (code0, text0), (code1, text1) = results[0], results[1]
    assert code0 != 0 and code1 != 0, text0[-2000:] + text1[-2000:]
    assert "stopped: trainer 1 ended before the job started" in text0, text0[-2000:]
    assert "FileNotFoundError: trainer 1: no data file here" in text0 + text1
    assert "[rank 1/2] FAILED" in text1, text1[-2000:]


def test_a_trainer_on_node_1_raising_after_the_first_collective(nodes, token):
    # crash.py: an allreduce a step; trainer 2 (node 1's) raises at step 1, after step 0's
    script = [str(SCRIPTS / "crash.py"), "--mode", "raise", "--rank", "2", "--step", "1"]
    results = wait_all(start_trainers(nodes, [0, 0, 1], script, token))
    assert all(code != 0 for code, _ in results.values()), \
        {t: text[-1500:] for t, (_, text) in results.items()}
    everything = "".join(text for _, text in results.values())
    assert "rank 2/3 step 0 loss" in everything  # the first collective was done
    assert "ZeroDivisionError: rank 2 failed on purpose at step 1" in results[2][1], \
        results[2][1][-2000:]
    for trainer in (0, 1):  # the others are told who failed
        assert f"[rank {trainer}/3] stopped: rank 2 failed first (exit code 1, after its " \
               f"collective #1)" in results[trainer][1], results[trainer][1][-2000:]
