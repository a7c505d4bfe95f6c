"""tests/gpu runs only where cupy imports and sees a GPU; elsewhere every test is skipped with
the reason printed (pytest -ra)."""
from __future__ import annotations

import pytest

collect_ignore = ["mpi"]  # run only inside test_gpu_data_parallel.py's mpiexec launches


def _cuda_unavailable_reason() -> str | None:
    try:
        import cupy
    except ImportError as e:
        return f"cupy is not installed ({e}); pip install -e '.[cuda12]' or '.[cuda13]'"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - any CUDA runtime failure means no usable GPU
        return f"CUDA runtime unusable: {e}"
    return None if n > 0 else "no CUDA device visible"


REASON = _cuda_unavailable_reason()


def pytest_collection_modifyitems(config, items):
    if REASON is None:
        return
    for item in items:
        if "tests/gpu" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.skip(reason=REASON))
