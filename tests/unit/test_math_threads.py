"""The math library's threads, as fluid 1.8 sets them: `import paddle.fluid` makes
OMP_NUM_THREADS 1 when unset and runs its CPU math on that many threads; spmd does it when
the first Executor is made, telling numpy's already loaded OpenBLAS too."""
import json
import os
import subprocess
import sys

from spmd.executor.math_threads import blas_threads

_PROBE = """
import json, os
import numpy  # loaded before spmd, as scripts do: OpenBLAS read the environment already
import spmd.fluid as fluid
from spmd.executor.math_threads import blas_threads
before = blas_threads()
fluid.Executor(fluid.CPUPlace())
print(json.dumps({"before": before, "after": blas_threads(),
                  "omp": os.environ.get("OMP_NUM_THREADS")}))
"""


def _probe(**env_vars):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env.update(env_vars)
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_numpy_here_runs_on_an_openblas_spmd_can_size():
    from spmd.executor.math_threads import set_blas_threads

    now = blas_threads()
    assert isinstance(now, int) and now >= 1
    try:
        assert set_blas_threads(1) is True and blas_threads() == 1
    finally:
        set_blas_threads(now)
    assert blas_threads() == now


def test_unset_means_one_thread_and_sets_the_variable():
    got = _probe()
    assert got["after"] == 1
    assert got["omp"] == "1"


def test_omp_num_threads_is_honoured():
    got = _probe(OMP_NUM_THREADS="2")
    assert got["after"] == 2
    assert got["omp"] == "2"


def test_openblas_num_threads_of_the_user_is_left_alone():
    got = _probe(OPENBLAS_NUM_THREADS="2")  # (OpenBLAS caps it at the machine's cores)
    assert got["after"] == got["before"] == min(2, os.cpu_count())
    assert got["omp"] == "1"


def test_a_bad_value_counts_as_one_as_fluid():
    from spmd.executor.math_threads import apply_fluid_math_threads
    env = {"OMP_NUM_THREADS": "many", "OPENBLAS_NUM_THREADS": "1"}
    assert apply_fluid_math_threads(env) == 1
    assert env["OMP_NUM_THREADS"] == "1"
