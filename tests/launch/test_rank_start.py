"""What spmd does so that a rank's start costs less, checked in real 2-rank jobs.

numpy imported before spmd, under mpiexec with no thread variable set (a plain script on a
plain machine): the guard forks each rank's supervisor after OpenBLAS made its thread pool.
The pool gets fluid's count before the fork, so the program never tells OpenBLAS a count
after it: that would rebuild the pool, whose new threads spin about 0.1 s of CPU each in the
rank's start-up (spmd/blas_threads.py).

On one node, the ranks load MPI with UCX's memory hooks off (spmd/comm/mpi.py; the rule's
cases: tests/unit/test_ucx_memory_hooks.py)."""
from __future__ import annotations

import json
import os
import subprocess

from launch_helpers import MPIEXEC, PYTHON, ROOT

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

_PROBE = """
import json, os
import numpy  # first, as scripts do: OpenBLAS made its pool for every core
import spmd.fluid as fluid
from spmd.executor.math_threads import blas_threads

def threads():
    return len(os.listdir("/proc/self/task"))

after_import, blas_after_import = threads(), blas_threads()
fluid.Executor(fluid.CPUPlace())
row = json.dumps({"rank": int(os.environ["PMI_RANK"]), "after_import": after_import,
                  "after_executor": threads(), "blas_after_import": blas_after_import,
                  "blas": blas_threads(), "omp": os.environ.get("OMP_NUM_THREADS"),
                  "parent": open(f"/proc/{os.getppid()}/cmdline").read().split("\\0")[:2]})
with open(os.path.join(os.environ["PROBE_OUT"], os.environ["PMI_RANK"]), "w") as f:
    f.write(row)  # a file a rank: two ranks' lines on one pipe may interleave
"""


def _probe(token: str, out_dir, ranks: int = 2, **env_vars) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS}
    env.update(LAUNCH_TEST_TOKEN=token, PYTHONUNBUFFERED="1", PROBE_OUT=str(out_dir),
               **env_vars)
    out = subprocess.run([MPIEXEC, "-n", str(ranks), PYTHON, "-c", _PROBE], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = [json.loads((out_dir / str(rank)).read_text()) for rank in range(ranks)]
    assert [row["rank"] for row in rows] == list(range(ranks)), rows
    return rows


def test_the_first_executor_adds_no_blas_thread_under_a_supervisor(token, tmp_path):
    for row in _probe(token, tmp_path):
        assert row["parent"][-1] == "-c", row  # the program runs under its supervisor (a fork)
        assert row["blas_after_import"] == row["blas"] == 1, row  # fluid's default, set early
        assert row["omp"] == "1", row
        # the pool did not come back: no thread beyond those the program had after import
        assert row["after_executor"] == row["after_import"], row


def test_a_users_openblas_num_threads_is_left_alone(token, tmp_path):
    for row in _probe(token, tmp_path, OPENBLAS_NUM_THREADS="2"):
        assert row["blas_after_import"] == row["blas"] == min(2, os.cpu_count()), row


def test_the_ranks_of_a_one_node_job_start_mpi_without_ucx_memory_hooks(token):
    env = {k: v for k, v in os.environ.items() if k != "UCX_MEM_EVENTS"}
    env.update(LAUNCH_TEST_TOKEN=token, PYTHONUNBUFFERED="1")
    probe = ("import os, numpy as np\n"
             "from spmd.comm.mpi import MPICommunicator\n"
             "comm = MPICommunicator()\n"
             "off = comm.allgather(np.array([os.environ.get('UCX_MEM_EVENTS') == 'no']))\n"
             "total = comm.allreduce(np.ones(4))\n"
             "if os.environ['PMI_RANK'] == '0':\n"
             "    print('RESULT', off.ravel().tolist(), total.tolist())")
    out = subprocess.run([MPIEXEC, "-n", "2", PYTHON, "-c", probe], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "RESULT [True, True] [2.0, 2.0, 2.0, 2.0]" in out.stdout, out.stdout
