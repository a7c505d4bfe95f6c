"""tests/gpu runs only where cupy imports and sees a GPU; elsewhere every test is skipped with
the reason printed (pytest -ra)."""
from __future__ import annotations

import pytest

from spmd.core.places import cuda_unavailable_reason

collect_ignore = ["mpi"]  # run only inside test_gpu_data_parallel.py's mpiexec launches


REASON = cuda_unavailable_reason()


def pytest_collection_modifyitems(config, items):
    if REASON is None:
        return
    for item in items:
        if "tests/gpu" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.skip(reason=REASON))
