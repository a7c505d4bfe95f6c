"""Kernels: collectives. They only pack and unpack arrays; the communication itself is done by
the context the executor passes as attrs["_comm"] (see spmd/executor/comm_context.py), which
may run it on a communication thread: outputs are then filled in place by the time the next
c_sync_comm_stream (or the end of the run) completes.

Outputs are always views of a fresh buffer, never the inputs: a gradient array may be shared by
several variables (a kernel may return its input as an output), and reducing it in place would
change them all.
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


@kernel("c_allreduce_sum")
def c_allreduce_sum(xp, ins, attrs, want):
    buf, views = _buffer(xp, ins, attrs, "c_allreduce_sum")
    attrs["_comm"].allreduce(buf, inline=attrs["use_calc_stream"])
    return {"Out": views}


@kernel("c_reduce_sum")
def c_reduce_sum(xp, ins, attrs, want):
    buf, views = _buffer(xp, ins, attrs, "c_reduce_sum")
    attrs["_comm"].reduce(buf, attrs["root_id"], inline=attrs["use_calc_stream"])
    return {"Out": views}


@kernel("c_broadcast")
def c_broadcast(xp, ins, attrs, want):
    buf, views = _buffer(xp, ins, attrs, "c_broadcast")
    attrs["_comm"].broadcast(buf, attrs["root"], inline=attrs["use_calc_stream"])
    return {"Out": views}


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
