"""ReduceStrategy.AllReduce: a sum-allreduce of every gradient right after its last producer,
one per gradient, or with fuse_all_reduce_ops one per bucket of gradients packed contiguously
(buckets of FLAGS_fuse_parameter_memory_size MB, filled in the order the backward pass finishes
gradients, one dtype per bucket). A c_sync_comm_stream before the first optimize op waits for
them, so communication overlaps the rest of the backward pass."""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..core.operator import OpRole
from .common import first_index, last_writer, make_op, place_after
from .registry import register_pass
from .sparse_grads import gather_sparse_gradients
from .strategy import ReduceStrategy


def buckets(params_grads, block, bucket_bytes: float) -> list[list[str]]:
    """Gradient names grouped into buckets of about `bucket_bytes`, in finishing order."""
    out, current, size, dtype = [], [], 0, None
    for _, grad in params_grads:
        var = block.vars[grad]
        nbytes = int(np.prod(var.shape)) * np.dtype(var.dtype).itemsize
        if current and (size + nbytes > bucket_bytes or var.dtype != dtype):
            out.append(current)
            current, size = [], 0
        current.append(grad)
        size += nbytes
        dtype = var.dtype
    if current:
        out.append(current)
    return out


def insert_allreduce(program, params_grads, fuse: bool, bucket_mb: float):
    """Rewrite `program` in place: the gradient all-reduces and the wait before the optimizer.
    Sparse gradients (SelectedRows) are gathered instead, each right after its last writer."""
    params_grads = gather_sparse_gradients(program, params_grads)
    block = program.global_block()
    last = last_writer(block)
    after = defaultdict(list)
    groups = (buckets(params_grads, block, bucket_mb * 1024 * 1024) if fuse
              else [[g] for _, g in params_grads])
    for group in groups:
        op = make_op(block, "c_allreduce_sum", {"X": group}, {"Out": group}, {},
                     OpRole.COMMUNICATE)
        after[max(last[g] for g in group)].append(op)
    grads = [g for _, g in params_grads]
    if grads:
        sync = make_op(block, "c_sync_comm_stream", {"X": grads}, {"Out": grads}, {},
                       OpRole.COMMUNICATE)
        after[first_index(block, OpRole.OPTIMIZE) - 1].append(sync)
    place_after(block, after)


@register_pass("allreduce", order=30, fields=("reduce_strategy", "fuse_all_reduce_ops"),
               when=lambda ctx: ctx.strategy.reduce_strategy == ReduceStrategy.AllReduce
               and ctx.aggregates_gradients())
def allreduce_pass(ctx) -> None:
    """ReduceStrategy.AllReduce on several devices: insert_allreduce."""
    insert_allreduce(ctx.program, ctx.params_grads(), ctx.strategy.fuse_all_reduce_ops,
                     ctx.bucket_mb)
    ctx.collectives_added = True
