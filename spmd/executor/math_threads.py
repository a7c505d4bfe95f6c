"""The math library's thread count, as fluid 1.8 sets it.

`import paddle.fluid` (fluid/__init__.py's __bootstrap__) sets OMP_NUM_THREADS to 1 when it is
unset and runs its CPU math (MKL/OpenBLAS) on that many threads: fluid parallelises across
places and ops, not inside one GEMM. spmd's kernels call numpy, whose OpenBLAS starts one
thread per core by default; with several places each on its own thread, every product then
spins a pool per place and a small model runs tens of times slower on a loaded machine (a
784x200 fc net: 100 ms of CPU a step against 3 ms). numpy is usually loaded before spmd, so
the environment variable alone comes too late: the loaded OpenBLAS is told through its own
setter.
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

from ..core.omp_default import note_omp_default

_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
            "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
            "openblas_get_num_threads")
_lib: ctypes.CDLL | None | bool = False  # False: not looked for yet


def _openblas():
    """numpy's OpenBLAS (the copy its wheel bundles, or the system's it links), or None."""
    global _lib
    if _lib is False:
        import glob  # only the first Executor looks (off import spmd's path)

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
    """Run numpy's BLAS on `count` threads from now on; False when it is not an OpenBLAS."""
    lib = _openblas()
    for name in _SETTERS if lib is not None else ():
        if hasattr(lib, name):
            getattr(lib, name)(ctypes.c_int(int(count)))
            return True
    return False


def apply_fluid_math_threads(env=None) -> int:
    """fluid's default: OMP_NUM_THREADS (1 when unset, and then set to 1) threads for the math
    library. A user's OPENBLAS_NUM_THREADS, read by OpenBLAS when it loaded, is left as it is.
    Returns the OMP_NUM_THREADS count."""
    env = os.environ if env is None else env
    defaulted = env is os.environ and "OMP_NUM_THREADS" not in env
    try:
        count = max(1, int(env.get("OMP_NUM_THREADS", "1")))
    except ValueError:
        count = 1
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
