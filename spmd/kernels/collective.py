"""Kernels: collectives. They only pack and unpack arrays; the communication itself is done by
the context the executor passes as attrs["_comm"] (see spmd/executor/comm_context.py), which
may run it on a communication thread: outputs are then filled in place by the time the next
c_sync_comm_stream (or the end of the run) completes.

Outputs are views of a fresh buffer, never the inputs reduced in place: a gradient array may be
shared by several variables (a kernel may return its input as an output), and reducing it in
place would change them all. (c_reduce_scatter_owned passes the pieces another rank owns
through unchanged: nothing here reads them.)
"""
from __future__ import annotations

from .registry import kernel


def _pack(xp, arrays):
    """One fresh contiguous buffer holding all arrays, and the views of it shaped like them."""
    if len(arrays) == 1:
        buf = xp.array(arrays[0], copy=True, order="C")
        return buf, [buf]
    sizes = [a.size for a in arrays]
    buf = xp.empty(sum(sizes), dtype=arrays[0].dtype)
    views, start = [], 0
    for a, n in zip(arrays, sizes):
        view = buf[start:start + n]
        view[...] = a.reshape(-1)
        views.append(view.reshape(a.shape))
        start += n
    return buf, views


def _check_one_dtype(arrays, op):
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) > 1:
        raise TypeError(f"{op}: a fused bucket must hold one dtype, got {sorted(map(str, dtypes))}")


def _fill_bucket(xp, bucket, arrays):
    """The plan's persistent bucket, holding `arrays`: those their producer already wrote into
    their slot are not copied again."""
    buf, views = bucket.get(xp)
    for a, view in zip(arrays, views):
        if a is not view:
            view[...] = a
    return buf, views


def _buffer(xp, ins, attrs, op):
    """The one contiguous buffer a collective works on, and its per-variable views."""
    arrays = ins["X"]
    _check_one_dtype(arrays, op)
    bucket = attrs.get("_bucket")
    return _fill_bucket(xp, bucket, arrays) if bucket else _pack(xp, arrays)


def _allreduce_kernel(reduction: str):
    op = f"c_allreduce_{reduction}"

    def run(xp, ins, attrs, want):
        buf, views = _buffer(xp, ins, attrs, op)
        attrs["_comm"].allreduce(buf, inline=attrs["use_calc_stream"], reduction=reduction)
        return {"Out": views}

    return run


def _reduce_kernel(reduction: str):
    op = f"c_reduce_{reduction}"

    def run(xp, ins, attrs, want):
        buf, views = _buffer(xp, ins, attrs, op)
        attrs["_comm"].reduce(buf, attrs["root_id"], inline=attrs["use_calc_stream"],
                              reduction=reduction)
        return {"Out": views}

    return run


c_allreduce_sum = kernel("c_allreduce_sum")(_allreduce_kernel("sum"))
c_reduce_sum = kernel("c_reduce_sum")(_reduce_kernel("sum"))
for _reduction in ("max", "min", "prod"):  # fluid.layers.collective's other reduce_types
    kernel(f"c_allreduce_{_reduction}")(_allreduce_kernel(_reduction))
    kernel(f"c_reduce_{_reduction}")(_reduce_kernel(_reduction))


@kernel("c_broadcast")
def c_broadcast(xp, ins, attrs, want):
    buf, views = _buffer(xp, ins, attrs, "c_broadcast")
    attrs["_comm"].broadcast(buf, attrs["root"], inline=attrs["use_calc_stream"])
    return {"Out": views}


def _sections(arrays, owners, nranks: int):
    """Where each piece goes in a buffer of `nranks` equal sections: (offsets within its
    owner's section, the section size)."""
    if len(owners) != len(arrays):
        raise ValueError(f"owners names {len(owners)} ranks for {len(arrays)} pieces")
    used = [0] * nranks
    offsets = []
    for a, owner in zip(arrays, owners):
        offsets.append(used[owner])
        used[owner] += a.size
    return offsets, max(used)


def _padded(xp, attrs, size: int, dtype):
    """The step's packing buffer, made once: zeros, so the padding at the end of the shorter
    sections stays zero; the pieces are written over every step. The collective using it
    completes within the step (inline, or by the c_sync_comm_stream), before the next step
    packs again."""
    buf = attrs.get("_packed")
    if buf is None or buf.size != size or buf.dtype != dtype or not isinstance(buf, xp.ndarray):
        buf = attrs["_packed"] = xp.zeros(size, dtype=dtype)
    return buf


@kernel("c_reduce_scatter_owned")
def c_reduce_scatter_owned(xp, ins, attrs, want):
    owners, ctx = attrs["owners"], attrs["_comm"]
    _check_one_dtype(ins["X"], "c_reduce_scatter_owned")
    arrays = [x if a < 0 else x[a:b] for x, a, b in
              ((ins["X"][src], a, b) for src, a, b in
               zip(attrs["sources"], attrs["starts"], attrs["ends"]))]
    offsets, section = _sections(arrays, owners, ctx.size)
    buf = _padded(xp, attrs, section * ctx.size, arrays[0].dtype)
    for a, owner, at in zip(arrays, owners, offsets):
        start = owner * section + at
        buf[start:start + a.size] = a.reshape(-1)
    # on the communication thread unless nothing is left to overlap: `mine` is then filled
    # by the c_sync_comm_stream before the optimizer reads it (the buffer waits as long)
    out = None if attrs["use_calc_stream"] else xp.empty(section, dtype=buf.dtype)
    mine = ctx.reduce_scatter(buf, out=out)
    return {"Out": [mine[at:at + a.size].reshape(a.shape) if owner == ctx.rank else a
                    for a, owner, at in zip(arrays, owners, offsets)]}


@kernel("c_allgather_owned")
def c_allgather_owned(xp, ins, attrs, want):
    arrays, owners, ctx = ins["X"], attrs["owners"], attrs["_comm"]
    _check_one_dtype(arrays, "c_allgather_owned")
    offsets, section = _sections(arrays, owners, ctx.size)
    block = _padded(xp, attrs, section, arrays[0].dtype)
    for a, owner, at in zip(arrays, owners, offsets):
        if owner == ctx.rank:
            block[at:at + a.size] = a.reshape(-1)
    every = ctx.allgather(block)
    return {"Out": [every[owner, at:at + a.size].reshape(a.shape)
                    for a, owner, at in zip(arrays, owners, offsets)]}


@kernel("c_sync_comm_stream")
def c_sync_comm_stream(xp, ins, attrs, want):
    attrs["_comm"].wait_all()
    return {"Out": list(ins.get("X", []))}


@kernel("c_comm_init")
def c_comm_init(xp, ins, attrs, want):
    attrs["_comm"].init(nranks=attrs["nranks"], rank=attrs["rank"],
                        endpoints=list(attrs["endpoints"]),
                        current_endpoint=attrs["current_endpoint"])
    return {}


def _check_nranks(attrs, op: str):
    comm = attrs["_comm"]
    if attrs["nranks"] != comm.size:
        raise ValueError(
            f"{op}: nranks={attrs['nranks']} but the job has {comm.size} place(s) over its "
            f"ranks; pass nranks equal to the number of places")
    return comm


@kernel("c_allgather")
def c_allgather(xp, ins, attrs, want):
    """Every place's X stacked along dim 0, in rank order."""
    x = ins["X"]
    every = _check_nranks(attrs, "c_allgather").allgather(xp.ascontiguousarray(x))
    return {"Out": every.reshape((-1,) + tuple(x.shape[1:]))}


@kernel("c_reducescatter")
def c_reducescatter(xp, ins, attrs, want):
    """The sum over places of X, each place keeping its 1/nranks of the rows (rank order)."""
    x = ins["X"]
    mine = _check_nranks(attrs, "c_reducescatter").reduce_scatter(xp.array(x, copy=True))
    return {"Out": mine.reshape((-1,) + tuple(x.shape[1:]))}


@kernel("c_sync_calc_stream")
def c_sync_calc_stream(xp, ins, attrs, want):
    return {"Out": list(ins.get("X", []))}
