"""Reduce mode's fused collectives (c_reduce_scatter_owned, c_allgather_owned) on three
in-process places, against numpy: pieces of unequal sizes and owners, one buffer section per
rank."""
from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest

from spmd.comm.local import LocalGroup
from spmd.kernels.context import KernelContext
from spmd.kernels.registry import get_kernel

SHAPES = [(3, 2), (5,), (2, 2), (1,), (4, 3)]
OWNERS = [2, 0, 2, 1, 0]  # rank 2 owns 10 elements, rank 0 owns 17, rank 1 owns 1
N = 3


def on_places(fn):
    """fn(place, its KernelContext) on N in-process places at once."""
    group = LocalGroup(N, timeout_s=10)
    comms = [group.communicator(i) for i in range(N)]
    try:
        with concurrent.futures.ThreadPoolExecutor(N) as pool:
            return list(pool.map(lambda i: fn(i, KernelContext(comm=comms[i])), range(N)))
    finally:
        for comm in comms:
            comm.close()


def pieces(rank: int, dtype="float64"):
    rng = np.random.default_rng(rank)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "on-the-comm-thread"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_reduce_scatter_owned_gives_each_owner_the_sum_of_its_pieces(dtype, inline):
    """Whole inputs and row chunks of them: the last input (4 x 3) is cut into rows [0, 1)
    for rank 1 and [1, 4) for rank 0, while packing. Not inline, the outputs are complete
    after wait_all (c_sync_comm_stream)."""
    kernel = get_kernel("c_reduce_scatter_owned")
    sources = [0, 1, 2, 3, 4, 4]
    starts, ends = [-1, -1, -1, -1, 0, 1], [-1, -1, -1, -1, 1, 4]
    owners = [2, 0, 2, 1, 1, 0]
    attrs = {"owners": owners, "sources": sources, "starts": starts, "ends": ends,
             "use_calc_stream": inline, "flat": False}

    def cut(arrays):
        return [arrays[s] if a < 0 else arrays[s][a:b] for s, a, b in zip(sources, starts, ends)]

    def step(rank, ctx):
        out = kernel(np, {"X": pieces(rank, dtype)}, attrs, None, ctx)["Out"]
        ctx.comm.wait_all()
        return out

    outs = on_places(step)
    total = cut([sum(pieces(r, dtype)[k] for r in range(N)) for k in range(len(SHAPES))])
    for rank in range(N):
        mine = cut(pieces(rank, dtype))
        for k, owner in enumerate(owners):
            got = outs[rank][k]
            assert got.shape == mine[k].shape and got.dtype == dtype
            want = total[k] if owner == rank else mine[k]  # the others pass through
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_allgather_owned_gives_every_rank_each_owners_pieces():
    kernel = get_kernel("c_allgather_owned")
    # each rank holds its updates of the pieces it owns, and stale values of the others
    outs = on_places(lambda r, ctx: kernel(np, {"X": pieces(r)}, {"owners": OWNERS}, None,
                                           ctx)["Out"])
    for rank in range(N):
        for k, owner in enumerate(OWNERS):
            np.testing.assert_array_equal(outs[rank][k], pieces(owner)[k])


def test_owners_must_name_every_piece():
    kernel = get_kernel("c_allgather_owned")
    with pytest.raises(ValueError, match="owners names 2 ranks for 5 pieces"):
        on_places(lambda r, ctx: kernel(np, {"X": pieces(r)}, {"owners": [0, 1]}, None, ctx))


@pytest.mark.parametrize("overlap", [False, True], ids=["no-overlap", "comm-thread"])
@pytest.mark.parametrize("reduction", ["sum", "max", "min", "prod"])
def test_allreduce_and_reduce_kernels_of_each_reduction(reduction, overlap):
    """c_allreduce_<reduction> over every place's pieces (fused in one buffer, queued on the
    communication thread when overlapping) and c_reduce_<reduction> into root 1, against
    numpy's reduction of the same pieces in place order."""
    ufunc = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}[reduction]
    allreduce = get_kernel(f"c_allreduce_{reduction}")
    reduce = get_kernel(f"c_reduce_{reduction}")

    def step(rank, ctx):
        every = allreduce(np, {"X": pieces(rank)}, {"use_calc_stream": not overlap}, None,
                          ctx)["Out"]
        ctx.comm.wait_all()
        root = reduce(np, {"X": pieces(rank)}, {"use_calc_stream": True, "root_id": 1}, None,
                      ctx)["Out"]
        return every, root

    outs = on_places(step)
    want = [ufunc.reduce([pieces(r)[k] for r in range(N)]) for k in range(len(SHAPES))]
    for rank in range(N):
        for k in range(len(SHAPES)):
            np.testing.assert_array_equal(outs[rank][0][k], want[k])
    for k in range(len(SHAPES)):
        np.testing.assert_array_equal(outs[1][1][k], want[k])


def test_flat_sections_reduce_to_their_owners_and_gather_back_whole():
    """Reduce mode over flat sections (passes/reduce_flat.py): the inputs end to end cut into
    N equal sections of elements (the last input crosses two of them); each owner gets the
    sum of its section, and the all-gather of the owners' pieces gives every whole array."""
    shapes = [(3, 2), (5,), (2, 4)]  # 19 elements: sections of 7 (the last padded by 2)
    spans = [(-1, -1), (0, 1), (1, 5), (0, 3), (3, 8)]  # pieces, end to end
    sources, owners = [0, 1, 1, 2, 2], [0, 0, 1, 1, 2]
    attrs = {"owners": owners, "sources": sources, "starts": [a for a, _ in spans],
             "ends": [b for _, b in spans], "use_calc_stream": True, "flat": True,
             "nranks": N}

    def inputs(rank):
        rng = np.random.default_rng(rank)
        return [rng.standard_normal(shape) for shape in shapes]

    def piece(arrays, k):
        a, b = spans[k]
        x = arrays[sources[k]]
        return x if a < 0 else x.reshape(-1)[a:b]

    def step(rank, ctx):
        mine = get_kernel("c_reduce_scatter_owned")(np, {"X": inputs(rank)}, attrs, None,
                                                     ctx)["Out"]
        # each owner's updated pieces (its reduced sum, doubled); the others pass stale values
        updated = [2 * m if owner == rank else m for m, owner in zip(mine, owners)]
        gathered = get_kernel("c_allgather_flat")(
            np, {"X": updated}, {"owners": owners, "counts": [1, 2, 2],
                                 "dims": [3, 2, 5, 2, 4], "ndims": [2, 1, 2]}, None, ctx)["Out"]
        return mine, gathered

    outs = on_places(step)
    total = [sum(inputs(r)[k] for r in range(N)) for k in range(len(shapes))]
    for rank in range(N):
        mine, gathered = outs[rank]
        for k, owner in enumerate(owners):
            if owner == rank:
                np.testing.assert_allclose(mine[k], piece(total, k), rtol=1e-12)
        for got, want in zip(gathered, total):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, 2 * want, rtol=1e-12)
