"""The math library's thread count, as fluid 1.8 sets it.

`import paddle.fluid` (fluid/__init__.py's __bootstrap__) sets OMP_NUM_THREADS to 1 when it is
unset and runs its CPU math (MKL/OpenBLAS) on that many threads: fluid parallelises across
places and ops, not inside one GEMM. spmd's kernels call numpy, whose OpenBLAS starts one
thread per core by default; with several places each on its own thread, every product then
spins a pool per place and a small model runs tens of times slower on a loaded machine (a
784x200 fc net: 100 ms of CPU a step against 3 ms). numpy is usually loaded before spmd, so
the environment variable alone comes too late: the loaded OpenBLAS is told through its own
setter (spmd/blas_threads.py, which also sizes it before the guard's fork).
"""
from __future__ import annotations

import os

from ..blas_threads import blas_threads, fluid_thread_count, set_blas_threads
from ..core.omp_default import note_omp_default

__all__ = ["apply_fluid_math_threads", "apply_once", "blas_threads", "set_blas_threads"]


def apply_fluid_math_threads(env=None) -> int:
    """fluid's default: OMP_NUM_THREADS (1 when unset, and then set to 1) threads for the math
    library. A user's OPENBLAS_NUM_THREADS, read by OpenBLAS when it loaded, is left as it is.
    Returns the OMP_NUM_THREADS count."""
    env = os.environ if env is None else env
    defaulted = env is os.environ and "OMP_NUM_THREADS" not in env
    count = fluid_thread_count(env)
    env["OMP_NUM_THREADS"] = str(count)
    if defaulted:  # a large random fill need not follow it (spmd/core/omp_default.py)
        note_omp_default(env["OMP_NUM_THREADS"])
    if "OPENBLAS_NUM_THREADS" not in env and blas_threads() not in (None, count):
        set_blas_threads(count)
    return count


_applied = False


def apply_once() -> None:
    """apply_fluid_math_threads() the first time an Executor is made (fluid does it once, on
    import)."""
    global _applied
    if not _applied:
        _applied = True
        apply_fluid_math_threads()
