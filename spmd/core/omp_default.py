"""Whether this process's OMP_NUM_THREADS is fluid's default rather than a user's or a
launcher's choice: the first Executor writes fluid's 1 into an unset OMP_NUM_THREADS for the
math library's products (spmd/executor/math_threads.py); spmd's own threaded work (a large
random fill, spmd/kernels/random.py) reads this to know the 1 was not asked for. Kept in core
because both the executor and the kernels, which must not import the executor, read it."""
from __future__ import annotations

import os

_written: str | None = None  # the value the default wrote, while OMP_NUM_THREADS holds it


def note_omp_default(value: str) -> None:
    """Record that OMP_NUM_THREADS was unset and is now set to fluid's default `value`."""
    global _written
    _written = value


def omp_threads_defaulted() -> bool:
    """True while OMP_NUM_THREADS holds the default written by note_omp_default (a value set
    since, by the user or a test, is theirs)."""
    return _written is not None and os.environ.get("OMP_NUM_THREADS") == _written
