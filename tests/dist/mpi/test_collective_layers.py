"""fluid.layers.collective's helpers inside a program every rank runs with its own Executor:
allreduce (sum, max, min, prod), broadcast, allgather and reducescatter along dim 0, and the two
sync helpers; expected values computed from rank and size. An unknown reduction is a clear
error."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.errors import ExecutionError, InvalidArgumentError
from spmd.fluid.layers import collective

pytestmark = pytest.mark.mpi(min_size=1)


def _run(build, feed):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        fetches = build(fluid.data("x", list(feed["x"].shape), "float32"))
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    return exe.run(main, feed=feed, fetch_list=fetches, scope=scope)


def test_allreduce_broadcast_and_syncs():
    t = detect()
    x = np.full((2, 3), t.rank + 1, dtype="float32")

    def build(v):
        total = collective._c_allreduce(v)
        also = collective._allreduce(v, sync_mode=True)
        collective._c_sync_comm_stream(total, 0)
        collective._c_sync_calc_stream(total)
        copy = fluid.layers.scale(v, scale=1.0)
        collective._c_broadcast(copy, root=t.size - 1)
        return [total, also, copy]

    total, also, copy = _run(build, {"x": x})
    np.testing.assert_array_equal(total, np.full((2, 3), t.size * (t.size + 1) / 2))
    np.testing.assert_array_equal(also, total)
    np.testing.assert_array_equal(copy, np.full((2, 3), t.size))


def test_allgather_and_reducescatter_along_dim0():
    t = detect()
    rows = 2 * t.size
    x = np.arange(rows * 3, dtype="float32").reshape(rows, 3) + t.rank

    def build(v):
        return [collective._c_allgather(v, nranks=t.size),
                collective._c_reducescatter(v, nranks=t.size)]

    gathered, mine = _run(build, {"x": x})
    base = np.arange(rows * 3, dtype="float32").reshape(rows, 3)
    np.testing.assert_array_equal(gathered, np.concatenate([base + r for r in range(t.size)]))
    total = base * t.size + sum(range(t.size))
    np.testing.assert_array_equal(mine, total[2 * t.rank:2 * t.rank + 2])


def test_nranks_other_than_the_job_size_is_a_clear_error():
    t = detect()
    with pytest.raises(ExecutionError, match=f"nranks={t.size + 1} but the job has {t.size}"):
        _run(lambda v: [collective._c_allgather(v, nranks=t.size + 1)],
             {"x": np.ones((2, 3), "float32")})


def test_max_min_prod_reductions():
    t = detect()
    # rank r holds [r+1, -(r+1), 1+r/8] in each row: max, min and product are known in closed
    # form (the product's factors are exact in float64)
    x = np.tile(np.array([t.rank + 1, -(t.rank + 1), 1 + t.rank / 8], "float64"), (2, 1))

    def build(v):
        return [collective._c_allreduce(v, reduce_type=kind, use_calc_stream=inline)
                for kind in ("max", "min", "prod") for inline in (False, True)] + [
            collective._allreduce(v, reduce_type="max")]

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        fetches = build(fluid.data("x", [2, 3], "float64"))
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x}, fetch_list=fetches,
                                               scope=fluid.Scope())
    n = t.size
    product = np.prod([r + 1 for r in range(n)], dtype="float64")
    expected = {
        "max": [n, -1, 1 + (n - 1) / 8],
        "min": [1, -n, 1],
        "prod": [product, product * (-1) ** n, np.prod([1 + r / 8 for r in range(n)])],
    }
    for k, kind in enumerate(("max", "min", "prod")):
        for inline in (0, 1):
            np.testing.assert_array_equal(got[2 * k + inline], np.tile(expected[kind], (2, 1)),
                                          err_msg=f"{kind} use_calc_stream={bool(inline)}")
    np.testing.assert_array_equal(got[-1], got[0])


def test_an_unknown_reduction_is_refused_while_building():
    with pytest.raises(InvalidArgumentError, match="reduce_type must be one of"):
        _run(lambda v: [collective._c_allreduce(v, reduce_type="mean")],
             {"x": np.ones((2, 3), "float32")})
