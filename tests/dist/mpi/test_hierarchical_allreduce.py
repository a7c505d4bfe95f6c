"""Hierarchical allreduce (BuildStrategy.use_hierarchical_allreduce; spmd/comm/hierarchy.py)
under mpiexec at 1, 2 and 4 ranks: reduce within each node, allreduce across the node leaders,
broadcast within each node, giving what the flat allreduce gives.

One machine, so nodes are simulated: at 4 ranks the job is 2 nodes of 2 (consecutive ranks,
from hierarchical_allreduce_inter_nranks=2 or from SPMD_NODE_SIZE=2), and the three-stage path
is checked to be taken (CompiledProgram.allreduce_layout, the communicator's count of
hierarchical allreduces); at 2 ranks the one node of 2 takes the flat path; MPI's own
shared-memory nodes (no size given) are one node here. Expected values come from rank and size.
"""
from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest
from dp_models import batches, build, params, shard

import spmd.fluid as fluid
from spmd.comm.factory import create_communicator, node_world_communicator
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect
from spmd.errors import InvalidArgumentError

pytestmark = pytest.mark.mpi(min_size=1)
STEPS = 4
TOLERANCE = {"float64": 1e-10, "float32": 1e-5}
DTYPES = ["float16", "float32", "float64", "int32", "int64"]
REDUCTIONS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def node_sizes(size: int) -> list[int]:
    """Every node size this job can be cut into (0: MPI's shared-memory nodes)."""
    return [0] + [k for k in range(2, size + 1) if size % k == 0]


@pytest.fixture(scope="module")
def comms():
    """node size -> a hierarchical communicator; made once, together, on every rank."""
    return {k: create_communicator("node_hierarchical", node_size=k)
            for k in node_sizes(detect().size)}


def values(rank: int, shape, dtype) -> np.ndarray:
    """Small integers from the rank: every reduction of them is exact in every dtype."""
    n = int(np.prod(shape))
    return ((np.arange(n) + rank) % 3 + 1).astype(dtype).reshape(shape)


def expected(size: int, shape, dtype, reduction: str) -> np.ndarray:
    out = values(0, shape, dtype)
    for r in range(1, size):
        out = REDUCTIONS[reduction](out, values(r, shape, dtype))
    return out


# -- the collective ---------------------------------------------------------------------------
def test_layout_of_the_job(comms):
    t = detect()
    for k, comm in comms.items():
        layout = comm.layout
        assert (layout.rank, layout.size) == (t.rank, t.size)
        if k == 0:  # MPI's shared-memory nodes: this machine is one node
            assert (layout.nodes, layout.node, layout.local_rank) == (1, 0, t.local_rank)
            assert "MPI_COMM_TYPE_SHARED" in layout.source
        else:
            assert (layout.nodes, layout.node, layout.local_rank) == (t.size // k, *divmod(
                t.rank, k))
        assert layout.hierarchical == (1 < layout.nodes < t.size)
        assert ("hierarchical allreduce" in layout.describe()) == layout.hierarchical
    if t.size == 4:
        assert comms[2].layout.hierarchical and comms[2].layout.leader == (t.rank % 2 == 0)


@pytest.mark.parametrize("reduction", list(REDUCTIONS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_equals_the_flat_one(comms, dtype, reduction):
    t = detect()
    for shape in [(0,), (1,), (3, 5)]:
        want = expected(t.size, shape, dtype, reduction)
        for k, comm in comms.items():
            before = comm.hierarchical_allreduces
            got = comm.allreduce(values(t.rank, shape, dtype), reduction)
            handle = comm.iallreduce(values(t.rank, shape, dtype), reduction)
            np.testing.assert_array_equal(got, want, err_msg=f"node size {k}")
            np.testing.assert_array_equal(handle.wait(), want, err_msg=f"node size {k}, async")
            flat = comm.flat.allreduce(values(t.rank, shape, dtype), reduction)
            np.testing.assert_array_equal(got, flat)
            # every allreduce took the three stages where the layout is hierarchical, none else
            taken = comm.hierarchical_allreduces - before
            assert taken == (2 if comm.layout.hierarchical else 0)


def test_big_and_bucketed_allreduces(comms):
    """Several MiB (past MPI's short-message paths) and a bucket of mixed shapes, async."""
    t = detect()
    big = (3 << 20) // 8
    shapes = [(2, 3), (0,), (1,), (5,)]
    for comm in comms.values():
        np.testing.assert_array_equal(comm.allreduce(values(t.rank, (big,), "float64")),
                                      expected(t.size, (big,), "float64", "sum"))
        views = comm.iallreduce_bucket([values(t.rank, s, "float32") for s in shapes]).wait()
        comm.wait_all()
        for s, view in zip(shapes, views):
            np.testing.assert_array_equal(view, expected(t.size, s, "float32", "sum"))


@pytest.mark.parametrize("elements", [4096, 1 << 20])
def test_float_sums_in_node_order(comms, elements):
    """Two processes per node, at most two nodes: the sum is bitwise (x0 + x1) + (x2 + x3),
    at any message size (a sum of two values does not depend on their order); the flat
    allreduce sums in its own algorithm's order, within a few ulps of it."""
    t = detect()
    if 2 not in comms:
        pytest.skip("needs an even number of ranks (nodes of 2)")
    xs = [np.random.default_rng(r).standard_normal(elements).astype(np.float32)
          for r in range(t.size)]
    nodes = [xs[i] + xs[i + 1] for i in range(0, t.size, 2)]
    want = nodes[0] if len(nodes) == 1 else nodes[0] + nodes[1]
    got = comms[2].iallreduce(xs[t.rank].copy()).wait()
    np.testing.assert_array_equal(got, want)
    flat = comms[2].flat.allreduce(xs[t.rank].copy())
    np.testing.assert_allclose(got, flat, rtol=0, atol=8 * np.finfo(np.float32).eps
                               * float(np.abs(np.stack(xs)).sum(axis=0).max()))


def test_async_allreduce_is_issued_without_waiting(comms):
    """iallreduce runs on the communicator's progress engine: the issuing thread goes on
    (as the backward pass does) while the other ranks have not even joined yet."""
    t = detect()
    if t.size < 2:
        pytest.skip("needs a second rank")
    comm = comms[2] if 2 in comms and comms[2].layout.hierarchical else comms[0]
    x = values(t.rank, (1000,), "float64")
    comm.barrier()
    if t.rank == 0:
        handle = comm.iallreduce(x)
        done_at_once = handle.test()  # the others are asleep: it cannot have completed
        result = handle.wait()
    else:
        time.sleep(0.5)
        done_at_once, result = False, comm.iallreduce(x).wait()
    assert not done_at_once
    np.testing.assert_array_equal(result, expected(t.size, (1000,), "float64", "sum"))


def test_ranks_asking_for_different_node_sizes_all_fail():
    """SPMD_NODE_SIZE set differently on some ranks: every rank refuses, none hangs."""
    t = detect()
    if t.size not in (2, 4):
        pytest.skip("written for 2 and 4 ranks")
    lo, hi = (2, 4) if t.size == 4 else (0, 2)
    mine = lo if t.rank < t.size // 2 else hi
    with pytest.raises(InvalidArgumentError,
                       match=rf"\[rank {t.rank}/{t.size}\] the processes ask for different node "
                             rf"sizes for the hierarchical allreduce: from {lo} to {hi} processes "
                             rf"per node .*; here {mine}"):
        create_communicator("node_hierarchical", node_size=mine)


def test_gpu_places_are_refused_where_the_layout_is_hierarchical():
    t = detect()
    if t.size != 4:
        pytest.skip("the 2 nodes of 2 need 4 ranks")
    with pytest.raises(InvalidArgumentError,
                       match=rf"\[rank {t.rank}/4\] BuildStrategy.use_hierarchical_allreduce on "
                             rf"GPU .*NCCL.*Set use_hierarchical_allreduce=False"):
        node_world_communicator(2, device_id=0)


# -- training ---------------------------------------------------------------------------------
def reference(model, opt, dtype, data):
    """One process on the whole batch."""
    main, startup, loss = build(model, opt, dtype)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for x, y in data:
        exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)
    return params(scope, main)


def digest(values: dict) -> np.ndarray:
    h = hashlib.sha256()
    for name in sorted(values):
        h.update(name.encode())
        h.update(np.ascontiguousarray(values[name]).tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8).copy()


def compiled_for(main, loss, inter_nranks: int, places: int, fuse: bool,
                 mode: str = "AllReduce"):
    strategy = fluid.BuildStrategy()
    strategy.use_hierarchical_allreduce = True
    strategy.hierarchical_allreduce_inter_nranks = inter_nranks
    strategy.fuse_all_reduce_ops = fuse
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    return fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * places)


def train(compiled, main, startup, loss, data):
    t = detect()
    mpi = MPICommunicator()
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for x, y in data:
        exe.run(compiled, feed={"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)},
                fetch_list=[loss], scope=scope)
        got = params(scope, main)
        everyone = mpi.allgather(digest(got))
        assert (everyone == everyone[0]).all(), "ranks hold different parameters"
    return got


def check_equal(got, want, dtype):
    tol = TOLERANCE[dtype]
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=tol,
                                   atol=tol * float(np.abs(value).max()), err_msg=name)


@pytest.mark.parametrize("places", [1, 2])
@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("how", ["inter_nranks", "SPMD_NODE_SIZE"])
def test_n_ranks_equal_one_process(monkeypatch, how, dtype, fuse, places):
    """N ranks on 1/N of each batch give one process's parameters; at 4 ranks every gradient
    allreduce of every step took the hierarchical path (2 nodes of 2)."""
    t = detect()
    if t.size % 2 and t.size > 1:
        pytest.skip("nodes of 2 need an even number of ranks")
    inter_nranks = 2 if how == "inter_nranks" and t.size > 1 else 0
    if how == "SPMD_NODE_SIZE":
        monkeypatch.setenv("SPMD_NODE_SIZE", "2" if t.size > 1 else "1")
    data = batches(dtype, STEPS)
    want = reference("mlp", "momentum", dtype, data)
    main, startup, loss = build("mlp", "momentum", dtype)
    compiled = compiled_for(main, loss, inter_nranks, places, fuse)
    comm = node_world_communicator(inter_nranks) if t.size > 1 else None
    before = comm.hierarchical_allreduces if t.size > 1 else 0
    check_equal(train(compiled, main, startup, loss, data), want, dtype)
    layout = compiled.allreduce_layout
    if t.size == 1:  # nothing to aggregate across processes: no hierarchy
        assert layout is None
        return
    assert layout is comm.layout  # the communicator made once, shared by every program
    assert (layout.nodes, layout.node, layout.local_rank) == (t.size // 2, *divmod(t.rank, 2))
    assert layout.hierarchical == (t.size == 4)
    ops = [op for op in compiled.data_parallel_program.global_block().ops
           if op.type == "c_allreduce_sum"]
    if not fuse:  # those with backward work after them run async, overlapping it
        assert any(op.attrs["use_calc_stream"] is False for op in ops)
    taken = comm.hierarchical_allreduces - before
    assert taken == (len(ops) * STEPS if layout.hierarchical else 0)


def test_reduce_mode_with_the_option_set_equals_one_process():
    """The option acts on allreduces; Reduce mode's reduce-scatter and all-gather are the
    flat ones, and its numbers are one process's."""
    t = detect()
    if t.size % 2 and t.size > 1:
        pytest.skip("nodes of 2 need an even number of ranks")
    data = batches("float64", STEPS)
    want = reference("mlp", "adam", "float64", data)
    main, startup, loss = build("mlp", "adam", "float64")
    compiled = compiled_for(main, loss, 2 if t.size > 1 else 0, 1, True, "Reduce")
    check_equal(train(compiled, main, startup, loss, data), want, "float64")


def test_inter_nranks_not_dividing_the_job_fails_on_every_rank():
    t = detect()
    main, startup, loss = build("mlp", "sgd", "float64")
    bad = 3 if t.size == 4 else 4
    compiled = compiled_for(main, loss, bad, 1, True)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    x, y = batches("float64", 1)[0]
    feed = {"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)}
    if t.size == 1:  # one process: nothing is aggregated, nothing to check
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
        assert compiled.allreduce_layout is None
        return
    divisors = "2, 4" if t.size == 4 else "2"
    with pytest.raises(InvalidArgumentError,
                       match=rf"\[rank {t.rank}/{t.size}\] BuildStrategy."
                             rf"hierarchical_allreduce_inter_nranks={bad}: {bad} processes per "
                             rf"node.* do not divide the {t.size} processes.*expected one of "
                             rf"\[{divisors}\], got {bad}"):
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
