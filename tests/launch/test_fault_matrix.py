"""The fault matrix (fault_matrix.py) under pytest: in CI a representative share (every fault
under mpiexec at 2 ranks, at step 2, before MPI starts and in the job's MPI start-up; the
early-exit and kill faults under the other launchers at 3 ranks, each instant);
the whole matrix with `SPMD_FAULT_MATRIX=all python -m pytest tests/launch/test_fault_matrix.py`
or as a table with `python tests/launch/fault_matrix.py`.

Each case asserts outcomes only (exit code, the rank and cause named, no process left behind),
bounded by fault_matrix.BOUND_S; none asserts a duration.
"""
from __future__ import annotations

import itertools
import os

import pytest
from fault_matrix import BEFORE_MPI, FAULTS, IN_MPI_START, LAUNCHERS, RANKS, applies, run_case
from slurm_cluster import skip_reason, slurm_cluster

EARLY_ENDS = ("raise", "sigkill", "exit3", "exit0", "os_exit0", "extra_step")
BEFORE_MPI_ENDS = tuple(f + BEFORE_MPI for f in ("raise", "exit3", "exit0", "os_exit0"))
IN_START_ENDS = tuple(f + IN_MPI_START for f in ("raise", "sigkill", "exit0", "os_exit0"))

if os.environ.get("SPMD_FAULT_MATRIX") == "all":
    CASES = [case for case in itertools.product(LAUNCHERS, RANKS, FAULTS)
             if applies(case[0], case[2])]
else:
    CASES = ([("mpiexec", 2, fault) for fault in FAULTS]
             + [(name, 3, fault) for name in ("spmd.run", "paddle-launch")
                for fault in EARLY_ENDS + BEFORE_MPI_ENDS + IN_START_ENDS]
             + [("srun", 2, fault) for fault in ("sigkill", "exit0", "os_exit0",
                                                 "os_exit0_own_mpi", "raise" + BEFORE_MPI,
                                                 "os_exit0" + BEFORE_MPI)]
             + [("env-only", 2, fault) for fault in ("ok", "raise", "sigkill", "os_exit0",
                                                     "differ", "raise" + BEFORE_MPI,
                                                     "exit0" + BEFORE_MPI,
                                                     "os_exit0" + BEFORE_MPI)])


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory):
    reason = skip_reason()
    if reason:
        print(reason)
        pytest.skip(reason)
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster.env


@pytest.mark.parametrize("launcher_name, ranks, fault", CASES,
                         ids=[f"{n}-{r}-{f}" for n, r, f in CASES])
def test_fault(launcher_name, ranks, fault, token, request):
    env = request.getfixturevalue("slurm_env") if launcher_name == "srun" else None
    outcome = run_case(launcher_name, ranks, fault, env, token=token)
    assert outcome.passed, outcome.why
