"""Data parallelism on GPUs, under mpiexec: NCCL collectives and the equivalence test with one
rank per GPU, and two ranks sharing one GPU through MPI (GPU arrays staged in host memory)."""
from __future__ import annotations

import pytest
from mpirun import run_mpi


def _gpu_count() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - conftest skips this file then
        return 0


@pytest.mark.parametrize("nprocs", [1, 2])
def test_gpu_data_parallel_under_mpiexec(nprocs):
    env = {}
    if nprocs > _gpu_count():
        env["FLAGS_selected_gpus"] = "0"  # ranks share GPU 0: the MPI (host-staged) path
    res = run_mpi(nprocs, ["-m", "pytest", "-q", "-x", "--with-mpi", "-p", "no:cacheprovider",
                           "tests/gpu/mpi/test_gpu_dp.py"], timeout=600, env=env)
    assert res.returncode == 0, res.stdout[-8000:]
    assert " passed" in res.stdout and " failed" not in res.stdout, res.stdout[-4000:]
