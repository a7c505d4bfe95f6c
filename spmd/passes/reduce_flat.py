"""Reduce mode over flat sections: where every update is elementwise, each fused bucket of
gradients, in parameter order, is cut into one equal section of elements per rank (ZeRO-1's
partition), so the reduce-scatter's send buffer is the bucket itself (the backward pass writes
the gradients straight into it), each owner updates flat views of its section's parameters and
state, and the all-gather's result is the parameters themselves, as views: no packing, no
slicing copies, no concatenation. Reduce mode then costs what AllReduce costs
(bench/reduce_floor.py measures the floor: a reduce-scatter plus an all-gather of the same
bytes, and 1/N of the update).

Used by reduce_mode.apply_reduce_mode when the gradients are fused and `flat_eligible`; the
row chunks of reduce_mode.py serve every other case.
"""
from __future__ import annotations

import math

from ..core.operator import OpRole
from .common import make_op


def flat_eligible(program, params_grads, splittable: set) -> bool:
    """Whether every parameter's update chain may run on flat pieces: each is row-separable
    (OpDef.row_separable) and each value it reads or writes has the parameter's shape
    or a single element (a learning rate, Adam's beta powers, a clip's norm), so no op of the
    chain broadcasts along an axis that flattening would lose."""
    if any(p.name not in splittable for p, _ in params_grads):
        return False
    block = program.global_block()
    owner: dict[str, object] = {}
    for p, g in params_grads:
        owner[p.name] = owner[g] = p
        for state in program.optimizer_state.get(p.name, []):
            owner[state] = p
    for op in block.ops:
        if op.role is not OpRole.OPTIMIZE:
            continue
        # by name: a Variable's == builds an op (fluid's operator overloading)
        params = {owner[n].name: owner[n] for n in op.input_arg_names if n in owner}
        if len(params) != 1:
            continue
        (param,) = params.values()
        shape = tuple(param.shape)
        for n in op.input_arg_names + op.output_arg_names:
            var = block._find_var_recursive(n)
            if var is None:
                return False
            if tuple(var.shape) != shape and math.prod(var.shape) != 1:
                return False
        for n in op.output_arg_names:
            owner[n] = param
    return True


def plan_flat_shards(params_grads, groups: list, nranks: int) -> dict:
    """param -> its Shards: each bucket's parameters laid end to end, in the bucket's order,
    and cut at every multiple of ceil(elements / nranks); a piece within section r belongs to
    rank r. A parameter within one section stays whole."""
    from .state_sharding import Shard

    param_of = {g: p for p, g in params_grads}
    shards: dict = {}
    for bucket in groups:
        params = [param_of[g] for _, g in params_grads if g in set(bucket)]
        total = sum(math.prod(p.shape) for p in params)
        section = -(-total // nranks)
        start = 0
        for p in params:
            size = math.prod(p.shape)
            cuts = sorted({start, start + size} | {r * section for r in range(1, nranks)
                                                    if start < r * section < start + size})
            if len(cuts) == 2:
                owner = min(start // section, nranks - 1) if section else 0
                shards[p.name] = [Shard(p.name, 0, None, owner)]
            else:
                shards[p.name] = [Shard(p.name, c, None, a // section, (a - start, b - start))
                                  for c, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))]
            start += size
    return shards


def gather_flat(block, params_grads, groups: list, shards: dict) -> list:
    """One all-gather per bucket: every owner's updated pieces in, the whole parameters out
    (views of the gathered buffer, in the bucket's order)."""
    ops = []
    for bucket in groups:
        params = [p for p, g in params_grads if g in set(bucket)]
        pieces = [(s.name(p.name), s.owner) for p in params for s in shards[p.name]]
        ops.append(make_op(
            block, "c_allgather_flat", {"X": [name for name, _ in pieces]},
            {"Out": [p.name for p in params]},
            {"owners": [owner for _, owner in pieces],
             "counts": [len(shards[p.name]) for p in params],
             "dims": [d for p in params for d in p.shape],
             "ndims": [len(p.shape) for p in params]}, OpRole.COMMUNICATE))
    return ops
