"""examples/slurm/train.sbatch as `sbatch -N 2` on a two-node SLURM cluster made on this
machine (two emulated nodes, tests/launch/netns.py, one slurmd in each; slurmctld in node 0),
in its three forms: `srun --mpi=pmi2`, `mpiexec` inside the allocation and paddle-launch inside
the allocation. Each trains what `mpiexec -n 4` trains on one node; a trainer raising on node 1
ends the step; nothing is left running.

Skipped, with the reason, without root or without SLURM (.ci/run installs it).
"""
from __future__ import annotations

import os
import re

import pytest
from launch_helpers import PYTHON, ROOT, SCRIPTS, base_env
from multi_node_helpers import TRAIN, one_node_reference
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


def test_sbatch_on_2_nodes_every_way(cluster, tmp_path, token):
    nodes, slurm = cluster
    out = tmp_path / "job.out"
    res = nodes[0].run(["sbatch", "--wait", "-N", "2", "--ntasks", "4", "--output", str(out),
                        "examples/slurm/train.sbatch"],
                       _env(token, slurm, STEPS=str(STEPS), LOG_DIR=str(tmp_path / "log")),
                       timeout=400, cwd=ROOT)
    text = out.read_text() if out.exists() else "(no job output)"
    logs = "".join(tail(p) for p in sorted(slurm.dir.glob("slurmd-*.log")))
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{text}\n{logs}"
    sections = dict(re.findall(r"^== form (\S+)\n(.*?)(?=^== form |\Z)", text, re.M | re.S))
    assert set(sections) == {"srun", "mpiexec", "paddle-launch"}, text
    assert re.search(r"workers +: 4 = 2 node\(s\) x 2", sections["paddle-launch"]), text
    reference = one_node_reference([TRAIN, "--steps", str(STEPS)], token)
    for form, section in sections.items():
        found = {int(m.group(1)): m.group() for m in
                 re.finditer(r"rank (\d)/4 trained: .*", section)}
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
    res = nodes[0].run(["sbatch", "--wait", "-N", "2", "--ntasks", "4", "--output", str(out),
                        "--wrap", script], _env(token, slurm), timeout=180, cwd=ROOT)
    text = out.read_text() if out.exists() else "(no job output)"
    assert res.returncode != 0, text
    report = (log / "failure_report.txt").read_text()
    assert re.search(rf"rank 3 on {nodes[1].host}: \[root cause\] exit code 1: "
                     rf"ZeroDivisionError", report), report
