"""Run by tests/gpu/test_gpu_data_parallel.py under mpiexec; expected values from rank and size."""
from __future__ import annotations

import hashlib
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "dist" / "mpi"))
from dp_models import batches, build, params, shard  # noqa: E402

import spmd.fluid as fluid  # noqa: E402
from spmd.comm.factory import world_communicator  # noqa: E402
from spmd.comm.mpi import MPICommunicator  # noqa: E402
from spmd.comm.topology import detect, select_gpu  # noqa: E402

cupy = pytest.importorskip("cupy")
pytestmark = pytest.mark.mpi(min_size=1)


def my_gpu() -> int:
    return select_gpu(detect(), cupy.cuda.runtime.getDeviceCount())


def test_collectives_on_gpu_arrays():
    t = detect()
    comm = world_communicator(my_gpu())
    shared = t.size > cupy.cuda.runtime.getDeviceCount()
    expected_kind = "HostStagedCommunicator" if shared else (
        "NCCLCommunicator" if t.size > 1 else "SelfCommunicator")
    assert type(comm).__name__ == expected_kind
    n = t.size
    a = cupy.full(5, t.rank + 1.0, dtype=cupy.float32)
    np.testing.assert_array_equal(comm.allreduce(a).get(), n * (n + 1) / 2)
    b = cupy.full(3, float(t.rank), dtype=cupy.float64)
    np.testing.assert_array_equal(comm.broadcast(b, n - 1).get(), n - 1)
    g = comm.allgather(cupy.array([t.rank], dtype=cupy.int64))
    np.testing.assert_array_equal(cupy.asnumpy(g).reshape(-1), np.arange(n))
    rs = comm.reduce_scatter(cupy.arange(2 * n, dtype=cupy.float64))
    np.testing.assert_array_equal(cupy.asnumpy(rs), n * np.arange(2 * n)[2 * t.rank:2 * t.rank + 2])
    mine = [t.rank + 1.0, -(t.rank + 1.0)]
    every = np.array([[r + 1.0, -(r + 1.0)] for r in range(n)])
    for kind, want in (("max", every.max(0)), ("min", every.min(0)), ("prod", every.prod(0))):
        got = comm.allreduce(cupy.array(mine, dtype=cupy.float64), kind)
        np.testing.assert_array_equal(got.get(), want, err_msg=kind)
        got = comm.reduce(cupy.array(mine, dtype=cupy.float64), 0, kind)
        if t.rank == 0:
            np.testing.assert_array_equal(got.get(), want, err_msg=f"reduce {kind}")


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_gpu_ranks_equal_one_cpu_process(mode, opt):
    t = detect()
    data = batches("float64", 4)
    main, startup, loss = build("mlp", opt, "float64")  # the reference: numpy, whole batch
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for x, y in data:
        exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)
    want = params(scope, main)

    main, startup, loss = build("mlp", opt, "float64")
    place = fluid.CUDAPlace(my_gpu())
    scope, exe = fluid.Scope(), fluid.Executor(place)
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    strategy.fuse_all_reduce_ops = True
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              build_strategy=strategy)
    for x, y in data:
        exe.run(compiled, feed={"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)},
                fetch_list=[loss], scope=scope)
    got = params(scope, main)
    digest = hashlib.sha256(b"".join(got[k].tobytes() for k in sorted(got))).digest()
    everyone = MPICommunicator().allgather(np.frombuffer(digest, dtype=np.uint8).copy())
    assert (everyone == everyone[0]).all()
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10,
                                   atol=1e-10 * float(np.abs(value).max()), err_msg=name)
