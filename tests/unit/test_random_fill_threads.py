"""A large uniform_random / gaussian_random fill on several threads (spmd/kernels/random.py:
uniform by ranges of an advanced PCG64 copy, normal drawn on one thread while another scales
and casts) gives, bit for bit, the values of one whole numpy draw on one thread, and leaves the
run's generator where that draw leaves it, whatever the thread count."""
from __future__ import annotations

import numpy as np
import pytest

from spmd.kernels.context import KernelContext
from spmd.kernels.random import FILL_CHUNK, PARALLEL_MIN, fill_threads
from spmd.kernels.registry import run_kernel

N = PARALLEL_MIN + 3 * FILL_CHUNK // 2 + 7  # over the threaded size, not a multiple of a chunk
DRAWS = {
    "uniform_random": ({"min": -0.3, "max": 0.7, "diag_num": 0, "diag_step": 0,
                        "diag_val": 1.0}, lambda g: g.uniform(-0.3, 0.7, size=N)),
    "gaussian_random": ({"mean": 0.1, "std": 0.2}, lambda g: g.normal(0.1, 0.2, size=N)),
}


@pytest.mark.parametrize("threads", ["1", "2", "3", "7"])
@pytest.mark.parametrize("op", sorted(DRAWS))
def test_a_threaded_fill_is_one_draw_and_continues_the_stream(op, threads, monkeypatch):
    monkeypatch.setenv("SPMD_FILL_THREADS", threads)
    assert fill_threads() == int(threads)
    attrs, whole_draw = DRAWS[op]
    attrs = dict(attrs, shape=[N], dtype="float32", seed=0)
    rng, expected_rng = np.random.default_rng(5), np.random.default_rng(5)
    # a 32-bit half buffered in the generator (an int32 draw before) must survive the fill
    assert rng.integers(0, 9, dtype=np.int32) == expected_rng.integers(0, 9, dtype=np.int32)
    out = run_kernel(op, np, {}, attrs, {"Out"}, KernelContext(rng=rng))["Out"]
    np.testing.assert_array_equal(out, whole_draw(expected_rng).astype("float32"))
    # the next draws, 32-bit and 64-bit, are the ones after a whole draw
    np.testing.assert_array_equal(rng.integers(0, 1 << 30, 5, dtype=np.int32),
                                  expected_rng.integers(0, 1 << 30, 5, dtype=np.int32))
    np.testing.assert_array_equal(rng.random(5), expected_rng.random(5))


def test_a_seeded_op_draws_the_same_on_any_thread_count(monkeypatch):
    """An op with its own seed gives the same table on 1 and 4 threads (the values a run
    with that seed has always given)."""
    attrs = {"min": -1.0, "max": 1.0, "diag_num": 0, "diag_step": 0, "diag_val": 1.0,
             "shape": [N], "dtype": "float32", "seed": 123}
    tables = []
    for threads in ("1", "4"):
        monkeypatch.setenv("SPMD_FILL_THREADS", threads)
        ctx = KernelContext(rng=np.random.default_rng(0))
        tables.append(run_kernel("uniform_random", np, {}, attrs, {"Out"}, ctx)["Out"])
    np.testing.assert_array_equal(tables[0], tables[1])
    np.testing.assert_array_equal(
        tables[0], np.random.default_rng(123).uniform(-1.0, 1.0, N).astype("float32"))


def test_fill_threads_reads_omp_num_threads(monkeypatch):
    monkeypatch.delenv("SPMD_FILL_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert fill_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "64")
    assert fill_threads() == 8  # at most 8
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert 1 <= fill_threads() <= 8


def test_spmd_fill_threads_names_the_count_over_omp_num_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("SPMD_FILL_THREADS", "3")
    assert fill_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("SPMD_FILL_THREADS", "not a number")  # ignored: OMP_NUM_THREADS's
    assert fill_threads() == 3


def _fill_threads_after_an_executor(env_omp):
    """(OMP_NUM_THREADS, fill_threads(), the cores it may use) in a fresh process made with
    OMP_NUM_THREADS=`env_omp` (None: unset), after its first Executor."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "SPMD_FILL_THREADS")}
    if env_omp is not None:
        env["OMP_NUM_THREADS"] = env_omp
    code = ("import json, os, spmd.fluid as fluid\n"
            "from spmd.kernels.random import fill_threads\n"
            "fluid.Executor(fluid.CPUPlace())\n"
            "print(json.dumps([os.environ['OMP_NUM_THREADS'], fill_threads(),"
            " len(os.sched_getaffinity(0))]))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_fluids_default_of_one_math_thread_does_not_bind_the_fill():
    """The first Executor writes fluid's 1 into an unset OMP_NUM_THREADS for BLAS; a fill
    still uses the process's cores. A 1 the user set is the user's."""
    omp, threads, cores = _fill_threads_after_an_executor(None)
    assert omp == "1" and threads == min(cores, 8)
    omp, threads, _ = _fill_threads_after_an_executor("1")
    assert omp == "1" and threads == 1
