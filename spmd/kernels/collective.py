"""Kernels: collectives. They issue the op on the communicator of their KernelContext (its
async forms, spmd/comm/base.py) and return the arrays the result will land in: the
communicator's progress engine may run the collective on a thread or stream of its own, and
the outputs are complete once the next c_sync_comm_stream (or the end of the run) has waited.
`use_calc_stream` (set by the passes where nothing lies between a collective and its wait)
asks for it to run at once.

Outputs are views of a fresh buffer (or of the plan's persistent bucket, or of the buffer
the plan chose for a flat all-gather's step: executor/buckets.py; or, for a flat
reduce-scatter summed in node-shared memory, of one of its two result arrays, each written
every other step, its views kept with it), never the inputs reduced in place: a gradient
array may be shared by several variables (a kernel may return its input as an output), and
reducing it in place would change them all. (c_reduce_scatter_owned passes the
pieces another rank owns through unchanged: nothing here reads them.)
"""
from __future__ import annotations

import operator

from ..core.operator import OpRole
from ..errors import InvalidArgumentError
from .registry import kernel

# (C attribute getters: the per-step keys and checks below cost no Python frames)
_DTYPE, _SHAPE, _SIZE = (operator.attrgetter(a) for a in ("dtype", "shape", "size"))


def _check_one_dtype(arrays, op):
    dtypes = set(map(_DTYPE, arrays))
    if len(dtypes) > 1:
        raise TypeError(f"{op}: a fused bucket must hold one dtype, got {sorted(map(str, dtypes))}")


def _overlaps(attrs, ctx) -> bool:
    """Whether the collective may run on the communication thread. Only one a pass placed
    (role COMMUNICATE) does: the pass placed its wait too, and check_waits saw that nothing
    reads its outputs before. One the program's author wrote (fluid.layers.collective's
    _allreduce, _c_allreduce, ...) runs in program order, its outputs complete when the next
    op reads them, as fluid's allreduce op on the compute stream; an optimizer reading an
    unlanded gradient halved nccl2_reduce_layer's updates (issue 22)."""
    return not attrs["use_calc_stream"] and ctx.op is not None \
        and ctx.op.role is OpRole.COMMUNICATE


def _allreduce_kernel(reduction: str):
    def run(xp, ins, attrs, want, ctx):
        bucket, overlap = ctx.bucket, _overlaps(attrs, ctx)
        if bucket is not None and not overlap and reduction == "sum":
            # a plan's fused bucket, needed now: summed in node-shared memory where every
            # rank is on this node (executor/shared_bucket.py), else None
            comm = ctx.comm
            comm.wait_all()  # the collectives issued before it complete first, as inline
            reduced = bucket.sum_across(comm, ins["X"])
            if reduced is not None:
                return {"Out": reduced}
        handle = ctx.comm.iallreduce_bucket(ins["X"], reduction, bucket, overlap=overlap)
        return {"Out": handle.out}

    return run


def _reduce_kernel(reduction: str):
    def run(xp, ins, attrs, want, ctx):
        handle = ctx.comm.ireduce_bucket(ins["X"], attrs["root_id"], reduction, ctx.bucket,
                                         overlap=_overlaps(attrs, ctx))
        return {"Out": handle.out}

    return run


for _reduction in ("sum", "max", "min", "prod"):  # fluid.layers.collective's reduce_types
    kernel(f"c_allreduce_{_reduction}", context=True)(_allreduce_kernel(_reduction))
    kernel(f"c_reduce_{_reduction}", context=True)(_reduce_kernel(_reduction))


@kernel("c_broadcast", context=True)
def c_broadcast(xp, ins, attrs, want, ctx):
    handle = ctx.comm.ibroadcast_bucket(ins["X"], attrs["root"], ctx.bucket,
                                        overlap=_overlaps(attrs, ctx))
    return {"Out": handle.out}


def flat_sections(sizes, owners, nranks: int):
    """Where each piece of `sizes` elements goes in a buffer of `nranks` equal sections:
    (its offset within its owner's section, the section size)."""
    if len(owners) != len(sizes):
        raise ValueError(f"owners names {len(owners)} ranks for {len(sizes)} pieces")
    used = [0] * nranks
    offsets = []
    for size, owner in zip(sizes, owners):
        offsets.append(used[owner])
        used[owner] += size
    return offsets, max(used)


def _sections(arrays, owners, nranks: int):
    return flat_sections([a.size for a in arrays], owners, nranks)


def _padded(xp, ctx, size: int, dtype):
    """The op's packing buffer, made once (kept in its context's scratch): zeros, so the
    padding at the end of the shorter sections stays zero; the pieces are written over every
    step. The collective using it completes within the step (at once, or by the
    c_sync_comm_stream), before the next step packs again."""
    buf = ctx.scratch.get("packed")
    if buf is None or buf.size != size or buf.dtype != dtype or not isinstance(buf, xp.ndarray):
        buf = ctx.scratch["packed"] = xp.zeros(size, dtype=dtype)
    return buf


def _cut(x, a: int, b: int, flat: bool):
    """A piece of an input: rows [a, b), elements [a, b) of it flattened, or all of it."""
    if a < 0:
        return x
    return x.reshape(-1)[a:b] if flat else x[a:b]


@kernel("c_reduce_scatter_owned", context=True)
def c_reduce_scatter_owned(xp, ins, attrs, want, ctx):
    xs, comm, flat = ins["X"], ctx.comm, attrs["flat"]
    rank = comm.rank
    # the layout, the same every step, kept in the op's scratch while its key holds: the
    # world, the inputs' shapes and dtypes (so the one-dtype check runs only when it is
    # made); looked up inline, no frame a step
    key = (rank, comm.size, tuple(map(_SHAPE, xs)), tuple(map(_DTYPE, xs)))
    cached = ctx.scratch.get("layout")
    if cached is None or cached[0] != key:
        _check_one_dtype(xs, "c_reduce_scatter_owned")
        cached = ctx.scratch["layout"] = (key, _owned_layout(xs, attrs, comm))
    pieces, section, passing = cached[1]
    # overlapped unless nothing is left to overlap: `mine` is then filled by the
    # c_sync_comm_stream before the optimizer reads it (the buffer waits as long)
    overlap, bucket, mine, held = not attrs["use_calc_stream"], ctx.bucket, None, None
    if bucket is not None and not overlap:  # summed in node-shared memory where every rank
        comm.wait_all()  # is on this node (executor/shared_bucket.py), else None
        shared = bucket.shared  # (once shared: straight to it, no frame a step)
        mine = shared.reduce_scatter(xs, bucket) if shared else bucket.sum_section(comm, xs)
        if mine is not None:  # one of two arrays, in turn: its outputs are kept with it
            held = bucket.kept
    if held is not None:
        # the outputs kept with `mine` (buckets.KeptOutputs), unless an input a passed-through
        # piece is cut from changed (looked up here: no frame a step)
        entries = held.entries
        entry = entries[0] if entries[0][0] is mine else entries[1]
        outs = entry[2] if entry[0] is mine else None
        if outs is not None:
            for (_, src), was in zip(passing, entry[1]):
                if xs[src] is not was:
                    outs = None
                    break
        if outs is None:
            outs = _keep_outputs(held, mine, xs, pieces, passing, rank, flat)
        return {"Out": outs}
    if mine is None:
        if bucket is not None:
            # flat sections: the bucket, the inputs laid end to end, is the send buffer itself
            buf, views = bucket.get(xp)
            for x, view in zip(xs, views):
                if x is not view:  # its producer did not write it in place
                    view[...] = x
        else:
            buf = _padded(xp, ctx, section * comm.size, xs[0].dtype)
            for src, a, b, owner, at, size, _ in pieces:
                start = owner * section + at
                buf[start:start + size] = _cut(xs[src], a, b, flat).reshape(-1)
        out = xp.empty(section, dtype=buf.dtype) if overlap else None
        mine = comm.ireduce_scatter(buf, out=out, overlap=overlap).out
    return {"Out": _owned_outputs(mine, xs, pieces, rank, flat)}


def _owned_outputs(mine, xs, pieces, rank: int, flat: bool) -> list:
    """The op's outputs: views of `mine` (this rank's summed section) for its own pieces, the
    other pieces passed through."""
    return [mine[at:at + size].reshape(shape) if owner == rank else _cut(xs[src], a, b, flat)
            for src, a, b, owner, at, size, shape in pieces]


def _keep_outputs(held, mine, xs, pieces, passing, rank: int, flat: bool) -> list:
    """The outputs over `mine`, one of the two result arrays node-shared summing uses in turn
    (executor/shared_bucket.py SharedSections), made and kept in `held` (buckets.KeptOutputs)
    with the result they view and the inputs the passed-through pieces are cut from: the
    steps after make no views while those stay."""
    entries = held.entries
    if entries[0][0] is mine:
        slot = 0
    elif entries[1][0] is mine:
        slot = 1
    else:  # a new result array: it replaces the older one
        slot = held.older
        held.older ^= 1
    outs = _owned_outputs(mine, xs, pieces, rank, flat)
    entries[slot] = (mine, [xs[src] for _, src in passing], outs)
    return outs


def _owned_layout(xs, attrs, comm):
    """c_reduce_scatter_owned's pieces, (source, start, end, owner, offset in the owner's
    section, size, shape) each; the section size; and (output index, source) of each piece
    another rank owns (passed through)."""
    flat = attrs["flat"]
    arrays = [_cut(xs[src], a, b, flat) for src, a, b in
              zip(attrs["sources"], attrs["starts"], attrs["ends"])]
    offsets, section = _sections(arrays, attrs["owners"], comm.size)
    pieces = [(src, a, b, owner, at, x.size, x.shape) for src, a, b, owner, at, x in
              zip(attrs["sources"], attrs["starts"], attrs["ends"], attrs["owners"], offsets,
                  arrays)]
    passing = [(k, piece[0]) for k, piece in enumerate(pieces) if piece[3] != comm.rank]
    return pieces, section, passing


@kernel("c_allgather_owned", context=True)
def c_allgather_owned(xp, ins, attrs, want, ctx):
    arrays, owners, comm = ins["X"], attrs["owners"], ctx.comm
    _check_one_dtype(arrays, "c_allgather_owned")
    offsets, section = _sections(arrays, owners, comm.size)
    block = _padded(xp, ctx, section, arrays[0].dtype)
    for a, owner, at in zip(arrays, owners, offsets):
        if owner == comm.rank:
            block[at:at + a.size] = a.reshape(-1)
    every = comm.iallgather(block, overlap=False).wait()
    return {"Out": [every[owner, at:at + a.size].reshape(a.shape)
                    for a, owner, at in zip(arrays, owners, offsets)]}


@kernel("c_allgather_flat", context=True)
def c_allgather_flat(xp, ins, attrs, want, ctx):
    """Every owner's flat pieces gathered; each output is the next counts[j] pieces, which lie
    end to end in the gathered sections, as one view shaped by dims (no concatenation)."""
    arrays, comm = ins["X"], ctx.comm
    rank, dtype = comm.rank, arrays[0].dtype
    # (kept as c_reduce_scatter_owned's, keyed by sizes)
    key = (rank, comm.size, tuple(map(_SIZE, arrays)), tuple(map(_DTYPE, arrays)))
    cached = ctx.scratch.get("layout")
    if cached is None or cached[0] != key:
        _check_one_dtype(arrays, "c_allgather_flat")
        cached = ctx.scratch["layout"] = (key, _gather_layout(arrays, attrs, comm))
    mine_at, spans, section = cached[1]
    # the buffer the plan chose for this step (executor/buckets.py GatherBuffer: never the
    # one the parameters are views of now, and never one a caller still holds), which the
    # update ops may have written their pieces into already; else a new one. Gathered in
    # place, this rank's pieces packed straight into its section.
    gather, gathered, handed = ctx.bucket, None, None
    if gather is not None:
        if gather.block is not None and gather.shared.rotation.meetings != gather.claimed_at:
            gather.drop_stale_block()  # (another plan of its shape ran the step before)
        # (chosen already where an update asked for its piece: no call then)
        gathered = gather.current if gather.current is not None else gather.buffer(xp)
        handed = gather.handed  # piece index -> the view handed out, or None
        if gathered.shape != (comm.size, section) or gathered.dtype != dtype:
            gathered, handed = None, None
    if gathered is None:
        gathered = xp.empty((comm.size, section), dtype=dtype)
    mine = gathered[rank]
    for i, at, size in mine_at:
        a = arrays[i]
        if handed is None or a is not handed[i]:  # its producer did not write it in place
            mine[at:at + size] = a.reshape(-1)
    every = None
    if gather is not None:  # through node-shared memory where every rank is on this node
        every = gather.gather_across(comm, mine, gathered)  # (executor/shared_bucket.py)
    if every is None:
        every = comm.iallgather(mine, out=gathered, overlap=False).wait()
    every = every.reshape(-1)
    # (shape None: a 1-D output is its span itself, no reshape call)
    return {"Out": [every[a:b] if shape is None else every[a:b].reshape(shape)
                    for a, b, shape in spans]}


def _gather_layout(arrays, attrs, comm):
    """c_allgather_flat's layout: this rank's pieces (index, offset in its section, size),
    each output's span of the gathered elements and its shape, and the section size."""
    owners = attrs["owners"]
    offsets, section = _sections(arrays, owners, comm.size)
    mine_at = [(i, offsets[i], a.size) for i, a in enumerate(arrays) if owners[i] == comm.rank]
    spans, k, d, dims = [], 0, 0, attrs["dims"]
    for count, ndim in zip(attrs["counts"], attrs["ndims"]):
        first = owners[k] * section + offsets[k]
        size = 0
        for i in range(k, k + count):
            if owners[i] * section + offsets[i] != first + size:
                raise ValueError(f"c_allgather_flat: piece {i} does not follow piece {i - 1} "
                                 f"in the sections; the pieces are not in section order")
            size += arrays[i].size
        shape = tuple(dims[d:d + ndim])
        spans.append((first, first + size, None if shape == (size,) else shape))
        k, d = k + count, d + ndim
    return mine_at, spans, section


@kernel("flat_slice")
def flat_slice(xp, ins, attrs, want):
    return {"Out": ins["X"].reshape(-1)[attrs["start"]:attrs["end"]]}


@kernel("c_sync_comm_stream", context=True)
def c_sync_comm_stream(xp, ins, attrs, want, ctx):
    ctx.comm.wait_all()
    return {"Out": list(ins.get("X", []))}


@kernel("c_comm_init", context=True)
def c_comm_init(xp, ins, attrs, want, ctx):
    """Make the communicator and check it is the world the program was transpiled for."""
    comm = ctx.comm
    nranks, rank = attrs["nranks"], attrs["rank"]
    endpoints, current = list(attrs["endpoints"]), attrs["current_endpoint"]
    tag = f"[rank {comm.rank}/{comm.size}]"
    if (nranks, rank) != (comm.size, comm.rank):
        raise InvalidArgumentError(
            f"{tag} the program was transpiled for trainer {rank} of {nranks} but this "
            f"process is rank {comm.rank} of {comm.size}; pass trainer_id=<MPI rank> and "
            f"one endpoint per MPI process to DistributeTranspiler.transpile")
    if endpoints and current and endpoints[rank] != current:
        raise InvalidArgumentError(
            f"{tag} current_endpoint {current} is not entry {rank} of the trainer "
            f"endpoints {endpoints}")
    return {}


def _check_nranks(attrs, ctx, op: str):
    comm = ctx.comm
    if attrs["nranks"] != comm.size:
        raise ValueError(
            f"{op}: nranks={attrs['nranks']} but the job has {comm.size} place(s) over its "
            f"ranks; pass nranks equal to the number of places")
    return comm


@kernel("c_allgather", context=True)
def c_allgather(xp, ins, attrs, want, ctx):
    """Every place's X stacked along dim 0, in rank order."""
    x = ins["X"]
    comm = _check_nranks(attrs, ctx, "c_allgather")
    every = comm.iallgather(xp.ascontiguousarray(x), overlap=False).wait()
    return {"Out": every.reshape((-1,) + tuple(x.shape[1:]))}


@kernel("c_reducescatter", context=True)
def c_reducescatter(xp, ins, attrs, want, ctx):
    """The sum over places of X, each place keeping its 1/nranks of the rows (rank order)."""
    x = ins["X"]
    comm = _check_nranks(attrs, ctx, "c_reducescatter")
    mine = comm.ireduce_scatter(xp.array(x, copy=True), overlap=False).wait()
    return {"Out": mine.reshape((-1,) + tuple(x.shape[1:]))}


@kernel("c_sync_calc_stream")
def c_sync_calc_stream(xp, ins, attrs, want):
    return {"Out": list(ins.get("X", []))}
