"""examples/slurm/train.sbatch as `sbatch -N 2` on a two-node SLURM cluster made on this
machine (two emulated nodes, tests/launch/netns.py, one slurmd in each; slurmctld in node 0),
in its three forms: `srun --mpi=pmi2`, `mpiexec` inside the allocation and paddle-launch inside
the allocation. Each trains what `mpiexec -n 4` trains on one node; a trainer raising on node 1
ends the step, named, in each form; with node 1's slurmd gone, `sbatch -N 2` pends with the
reason (the last test: node 1 stays down); nothing is left running.

Skipped, with the reason, without root or without SLURM (.ci/run installs it).
"""
from __future__ import annotations

import os
import re
import signal
import time

import pytest
from launch_helpers import PYTHON, ROOT, SCRIPTS, base_env
from multi_node_helpers import TRAIN, TRAINED, one_node_reference
from netns import left_in, skip_reason, two_nodes
from slurm_cluster import skip_reason as slurm_skip_reason
from slurm_cluster import slurm_two_node_cluster, tail

STEPS = 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = skip_reason() or slurm_skip_reason()
    if reason:
        print(reason)
        pytest.skip(reason)
    with two_nodes(resolvable=True) as nodes:
        with slurm_two_node_cluster(tmp_path_factory.mktemp("slurm2"), nodes) as slurm:
            yield nodes, slurm
        assert not left_in(nodes), f"left running in the emulated nodes: {left_in(nodes)}"


def _env(token, slurm, **extra):
    path = f"{os.path.dirname(PYTHON)}{os.pathsep}{os.environ.get('PATH', '')}"
    return base_env(token, PATH=path, PYTHON=PYTHON, **slurm.env, **extra)


def _sbatch(nodes, args: list[str], env: dict, out, timeout: float):
    """`sbatch --wait -N 2 --ntasks 4 --output out ARGS` from node 0. (Every mpiexec of a
    cluster once died of SIGFPE here: Hydra misread its host names; netns.node_tag and
    tests/launch/test_hydra_slurm_nodelist.py say how, and why no longer.)"""
    return nodes[0].run(["sbatch", "--wait", "-N", "2", "--ntasks", "4", "--output", str(out),
                         *args], env, timeout=timeout, cwd=ROOT)


def test_sbatch_on_2_nodes_every_way(cluster, tmp_path, token):
    nodes, slurm = cluster
    out = tmp_path / "job.out"
    res = _sbatch(nodes, ["examples/slurm/train.sbatch"],
                  _env(token, slurm, STEPS=str(STEPS), LOG_DIR=str(tmp_path / "log")), out, 400)
    text = out.read_text() if out.exists() else "(no job output)"
    logs = "".join(tail(p) for p in sorted(slurm.dir.glob("slurmd-*.log")))
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{text}\n{logs}"
    sections = dict(re.findall(r"^== form (\S+)\n(.*?)(?=^== form |\Z)", text, re.M | re.S))
    assert set(sections) == {"srun", "mpiexec", "paddle-launch"}, text
    assert re.search(r"workers +: 4 = 2 node\(s\) x 2", sections["paddle-launch"]), text
    reference = one_node_reference([TRAIN, "--steps", str(STEPS)], token)
    for form, section in sections.items():
        found = {int(m.group(1)): m.group() for m in
                 re.finditer(TRAINED.format(rank=r"(\d)", size=4), section)}
        assert found == reference, f"{form}:\n{section}"
    hosts = {re.search(r"host=(\S+)", (tmp_path / "log" / f"workerstatus.{r}").read_text())
             .group(1) for r in range(4)}
    assert hosts == {n.host for n in nodes}  # paddle-launch's ranks ran on both nodes


def test_srun_trainer_raising_on_node_1_ends_the_step(cluster, token):
    nodes, slurm = cluster
    res = nodes[0].run(["srun", "--mpi=pmi2", "-N", "2", "-n", "4", PYTHON,
                        str(SCRIPTS / "crash.py"), "--mode", "raise", "--rank", "3",
                        "--token", token], _env(token, slurm), timeout=120, cwd=ROOT)
    assert res.returncode != 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "ZeroDivisionError: rank 3 failed on purpose" in res.stdout + res.stderr


def test_paddle_launch_in_the_allocation_names_a_rank_failing_on_node_1(cluster, tmp_path,
                                                                        token):
    nodes, slurm = cluster
    log, out = tmp_path / "log", tmp_path / "job.out"
    script = (f"{PYTHON} -m launch --log_dir {log} {SCRIPTS / 'crash.py'} --mode raise "
              f"--rank 3 --step 1 --token {token}")
    res = _sbatch(nodes, ["--wrap", script], _env(token, slurm), out, 180)
    text = out.read_text() if out.exists() else "(no job output)"
    assert res.returncode != 0, text
    report = (log / "failure_report.txt").read_text()
    assert re.search(rf"rank 3 on {nodes[1].host}: \[root cause\] exit code 1: "
                     rf"ZeroDivisionError", report), report


def test_mpiexec_in_the_allocation_names_a_rank_failing_on_node_1(cluster, tmp_path, token):
    nodes, slurm = cluster
    out = tmp_path / "job.out"
    script = ("mpiexec -n 4 sh -c 'echo where: rank $PMI_RANK on $(hostname)' && "
              f"mpiexec -n 4 {PYTHON} -m spmd.run {SCRIPTS / 'crash.py'} --mode raise "
              f"--rank 3 --step 1 --token {token}")
    res = _sbatch(nodes, ["--wrap", script], _env(token, slurm), out, 180)
    text = out.read_text() if out.exists() else "(no job output)"
    assert res.returncode != 0, text
    assert "[rank 3/4] FAILED: ZeroDivisionError: rank 3 failed on purpose at step 1" in text, \
        text[-3000:]
    assert f"where: rank 3 on {nodes[1].host}" in text, text  # rank 3 ran on node 1


def _squeue(nodes, slurm, token, job: str) -> str:
    res = nodes[0].run(["squeue", "-h", "-j", job, "-o", "%T|%r"], _env(token, slurm),
                       timeout=30)
    return res.stdout.strip()


# Last in the module: it stops node 1's slurmd, which is not started again.
def test_sbatch_on_2_nodes_when_node_1_never_comes_pends_with_the_reason(cluster, token):
    nodes, slurm = cluster
    pid = int((slurm.dir / f"slurmd-{nodes[1].host}.pid").read_text())
    os.kill(pid, signal.SIGTERM)  # node 1's slurmd is gone (a node that died or never came)
    deadline = time.monotonic() + 30
    while pid in nodes[1].pids() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pid not in nodes[1].pids(), "node 1's slurmd did not stop"
    # what slurmctld concludes after SlurmdTimeout, told now (the test waits for no timeout)
    down = nodes[0].run(["scontrol", "update", f"NodeName={nodes[1].host}", "State=DOWN",
                         "Reason=slurmd not responding"], _env(token, slurm), timeout=30)
    assert down.returncode == 0, down.stdout + down.stderr
    res = nodes[0].run(["sbatch", "--parsable", "-N", "2", "--ntasks", "4", "--wrap",
                        f"{PYTHON} {SCRIPTS / 'crash.py'} --token {token}"],
                       _env(token, slurm), timeout=30, cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    job = res.stdout.strip().split(";")[0]
    try:
        state = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the scheduler's first pass gives the reason
            state = _squeue(nodes, slurm, token, job)
            if state.startswith("PENDING|") and state != "PENDING|None":
                break
            time.sleep(0.5)
        assert state.startswith("PENDING|"), state
        assert re.search(r"ReqNodeNotAvail|Nodes required for job are DOWN", state), state
        print(f"job {job}: {state}")
        # and a job that cannot wait is refused at once, with the reason
        now = nodes[0].run(["srun", "--immediate=3", "-N", "2", "true"],
                           _env(token, slurm), timeout=60, cwd=ROOT)
        assert now.returncode != 0, now.stdout + now.stderr
        assert "Required node not available (down, drained or reserved)" in now.stderr, \
            now.stderr
        assert "unable to allocate resources" in now.stderr.lower(), now.stderr
    finally:
        nodes[0].run(["scancel", job], _env(token, slurm), timeout=30)
    deadline = time.monotonic() + 30
    while _squeue(nodes, slurm, token, job) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _squeue(nodes, slurm, token, job), "the pending job was not cancelled"
