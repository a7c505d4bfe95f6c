"""examples/slurm/train.sbatch on a real single-node SLURM cluster started on this machine:
Debian's slurmctld, slurmd and munge, configured in a temporary directory, stopped after.

Skipped, with the reason, where those are not installed (.ci/run installs them) or where this
is not root (slurmd must start jobs as their user).
"""
from __future__ import annotations

import os
import re

import pytest
from launch_helpers import PYTHON, ROOT, run
from slurm_cluster import skip_reason, slurm_cluster, tail


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A one-node SLURM cluster; yields its environment for the client commands."""
    reason = skip_reason()
    if reason:
        print(reason)
        pytest.skip(reason)
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


def _trained(section: str) -> dict:
    """rank -> (first loss, last loss) from `rank r/n trained: loss A -> B` lines."""
    found = {}
    for rank, size, first, last in re.findall(
            r"rank (\d+)/(\d+) trained: loss ([0-9.]+) -> ([0-9.]+)", section):
        assert size == "2", section
        found[int(rank)] = (float(first), float(last))
    return found


def test_sbatch_trains_on_2_ranks_every_way(slurm, tmp_path, token):
    out = tmp_path / "job.out"
    path = f"{os.path.dirname(PYTHON)}{os.pathsep}{os.environ.get('PATH', '')}"
    res = run(["sbatch", "--wait", "--output", str(out), "examples/slurm/train.sbatch"], token,
              timeout=180, cwd=ROOT, PATH=path, PYTHON=PYTHON, STEPS="10",
              LOG_DIR=str(tmp_path / "log"), **slurm.env)
    text = out.read_text() if out.exists() else "(no job output)"
    assert res.returncode == 0, f"{res.output}\n{text}\n{tail(slurm.dir / 'slurmd.log')}"
    sections = dict(re.findall(r"^== form (\S+)\n(.*?)(?=^== form |\Z)", text, re.M | re.S))
    assert set(sections) == {"srun", "mpiexec", "paddle-launch"}, text
    # paddle-launch took its nodes and processes per node from the allocation
    assert re.search(r"scheduler +: slurm", sections["paddle-launch"]), text
    assert re.search(r"workers +: 2 = 1 node\(s\) x 2", sections["paddle-launch"]), text
    for form, section in sections.items():
        trained = _trained(section)
        assert set(trained) == {0, 1}, f"{form}: not every rank trained:\n{section}"
        for rank, (first, last) in trained.items():
            assert last < first / 10, f"{form} rank {rank}: loss {first} -> {last}"


def test_srun_rank_that_raises_ends_the_job(slurm, token):
    # No launcher: spmd's MPI initialization turns an uncaught exception into MPI_Abort,
    # which makes srun end every task of the step.
    script = str(ROOT / "tests" / "launch" / "scripts" / "crash.py")
    res = run(["srun", "--mpi=pmi2", "-n", "2", PYTHON, script, "--mode", "raise", "--rank", "1",
               "--token", token], token, timeout=60, **slurm.env)
    assert res.returncode != 0, res.output[-3000:]
    assert "ZeroDivisionError: rank 1 failed on purpose" in res.output
