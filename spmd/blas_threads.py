"""numpy's OpenBLAS thread pool: how many threads its products run on, told through the loaded
library's own setter (the environment variables count only for a library not yet loaded).

One OpenBLAS behaviour shapes this module. A fork (the guard's supervisor, spmd/guard) shuts
the pool down, and in the child the next call of the setter builds it again, whatever count
it asks for; each new pool thread then spins about 0.1 s before it sleeps. Measured at 2 ranks
on 2 cores, numpy imported before spmd: 45-56 ms of CPU taken from each rank during its first
data-parallel step, which then took 80-90 ms instead of 30-40. So where numpy is loaded before
the fork, the count the first Executor will want is set before it (size_before_fork), and the
setter is never called for a count the pool has already.

The policy, fluid's one math thread an op, is the Executor's (spmd/executor/math_threads.py).
"""
from __future__ import annotations

import os
import sys

_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
            "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
            "openblas_get_num_threads")
_lib = False  # a ctypes.CDLL, None (no OpenBLAS), or False: not looked for yet


def _openblas():
    """numpy's OpenBLAS (the copy its wheel bundles, or the system's it links), or None."""
    global _lib
    if _lib is False:
        import ctypes
        import glob  # looked for once, off import spmd's path

        import numpy as np

        _lib = None
        folder = os.path.dirname(np.__file__)
        candidates = sorted(glob.glob(os.path.join(folder + ".libs", "*openblas*.so*")))
        candidates += sorted(glob.glob(os.path.join(folder, ".dylibs", "*openblas*")))
        candidates += ["libopenblas.so.0", "libopenblas.so"]
        for path in candidates:
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            if any(hasattr(lib, name) for name in _SETTERS):
                _lib = lib
                break
    return _lib


def blas_threads() -> int | None:
    """How many threads numpy's BLAS runs a product on now (None: not an OpenBLAS)."""
    lib = _openblas()
    for name in _GETTERS if lib is not None else ():
        if hasattr(lib, name):
            return int(getattr(lib, name)())
    return None


def set_blas_threads(count: int) -> bool:
    """Run numpy's BLAS on `count` threads from now on; False when it is not an OpenBLAS.
    A count the pool has already is not told again (after a fork that would rebuild it)."""
    lib = _openblas()
    if lib is None:
        return False
    if blas_threads() == int(count):
        return True
    for name in _SETTERS:
        if hasattr(lib, name):
            import ctypes

            getattr(lib, name)(ctypes.c_int(int(count)))
            return True
    return False


def fluid_thread_count(env) -> int:
    """fluid's math thread count: OMP_NUM_THREADS, 1 when unset or not a number."""
    try:
        return max(1, int(env.get("OMP_NUM_THREADS", "1")))
    except ValueError:
        return 1


def size_before_fork(env=None) -> None:
    """Before the guard forks a process that has numpy loaded: give its BLAS the count the first
    Executor will (OMP_NUM_THREADS as the user or share_cpu_threads will have set it, else 1),
    so the child never calls the setter. A user's OPENBLAS_NUM_THREADS is left alone, as the
    Executor leaves it."""
    env = os.environ if env is None else env
    if "numpy" not in sys.modules or "OPENBLAS_NUM_THREADS" in env:
        return
    from .comm.topology import share_cpu_threads

    planned = dict(env)
    share_cpu_threads(planned)  # what `import spmd` will write, read from a copy
    if blas_threads() not in (None, fluid_thread_count(planned)):
        set_blas_threads(fluid_thread_count(planned))
