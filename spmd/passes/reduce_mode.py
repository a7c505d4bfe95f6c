"""ReduceStrategy.Reduce: every parameter, or every row chunk of a large one, gets an owner rank;
its gradient is reduced to the owner, only the owner runs its update (with its regularization
and clipping terms) and holds its optimizer state, then the owner broadcasts the result.

Owners: a parameter holding more than 1/(2N) of all parameter bytes (and at least N rows) is cut
into N row chunks; chunks and whole parameters go greedily by bytes (largest first, ties by
name) to the least loaded rank (ties to the lowest), so optimizer state per rank is about 1/N
however unequal the parameters are. All of it is deterministic: every rank compiles the same
graph.

Ops get owners by data flow: an optimize op that depends on one parameter's gradient, value or
state belongs to that parameter's owner; for a chunked parameter the op is cloned once per chunk
onto the chunk's slices (`name@SHARDc`) and each clone belongs to the chunk's owner. The one op
allowed to mix parameters is a `sum` of terms each computed on its owner only (global-norm
clipping's squared norms): other ranks read those terms as zeros (see executor/plan.py), and an
allreduce of the sum completes it. At the end each owner broadcasts what it updated, and the
chunks of a parameter are concatenated back into it on every rank.

With fused gradients and every update elementwise (the usual case), owners hold equal flat
sections of each bucket instead (reduce_flat.py): no packing, slicing or concatenation.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..core.operator import OpRole
from ..errors import InvalidArgumentError
from ..ops.registry import get_op_def
from .allreduce import buckets
from .common import first_index, last_writer, make_op, place_after
from .reduce_flat import flat_eligible, gather_flat, plan_flat_shards
from .registry import register_pass
from .sparse_grads import gather_sparse_gradients
from .state_sharding import Shard, StateSharding
from .strategy import ReduceStrategy


def _nbytes(var) -> int:
    return int(np.prod(var.shape)) * np.dtype(var.dtype).itemsize


def plan_shards(params, nranks: int, splittable=None) -> dict[str, list[Shard]]:
    """`splittable`: names of parameters that may be cut (default: all)."""
    total = sum(_nbytes(p) for p in params)
    items = []  # (bytes, param, chunk index, rows)
    for p in params:
        rows = p.shape[0] if p.shape else 0
        allowed = splittable is None or p.name in splittable
        if allowed and nranks > 1 and rows >= nranks and _nbytes(p) * 2 * nranks > total:
            bounds = np.linspace(0, rows, nranks + 1).round().astype(int)
            for c in range(nranks):
                a, b = int(bounds[c]), int(bounds[c + 1])
                items.append((_nbytes(p) * (b - a) // rows, p.name, c, (a, b)))
        else:
            items.append((_nbytes(p), p.name, 0, None))
    load = [0] * nranks
    shards: dict[str, list[Shard]] = defaultdict(list)
    for nbytes, name, c, rows in sorted(items, key=lambda it: (-it[0], it[1], it[2])):
        rank = min(range(nranks), key=lambda r: (load[r], r))
        load[rank] += nbytes
        shards[name].append(Shard(name, c, rows, rank))
    return {name: sorted(s, key=lambda sh: sh.index) for name, s in shards.items()}


def assign_owners(params, nranks: int) -> dict[str, int]:
    """Owner of every parameter that is not cut into chunks."""
    return {name: s[0].owner for name, s in plan_shards(params, nranks).items()
            if not s[0].cut}


def apply_reduce_mode(program, params_grads, nranks: int, fuse_broadcast: bool,
                      fuse_all_reduce: bool = False, bucket_mb: float = 32.0) -> StateSharding:
    """Rewrite `program` in place; returns where its optimizer state lives.

    With fuse_all_reduce (one dtype, and no op reading a gradient before the last one is
    done), gradients go in buckets of about `bucket_mb` MB, filled in the order the backward
    pass finishes them, each with a section per owner: one reduce-scatter per bucket right
    after its last gradient (overlapping the rest of the backward pass), one all-gather of
    the updated parameters after the optimizer (DESIGN: Reduce mode costs what AllReduce
    costs). Otherwise one reduce per gradient (or chunk) right after its last producer, and
    broadcasts."""
    block = program.global_block()
    splittable = _row_separable(program, params_grads)
    last = last_writer(block)
    fused = (fuse_all_reduce and len({p.dtype for p, _ in params_grads}) == 1
             and not _read_before_all_done(block, params_grads, last))
    groups = buckets(params_grads, block, bucket_mb * 1024 * 1024) if fused else []
    # fused, with every update elementwise: owners hold equal flat sections of each bucket
    flat = fused and flat_eligible(program, params_grads, splittable)
    shards = (plan_flat_shards(params_grads, groups, nranks) if flat else
              plan_shards([p for p, _ in params_grads], nranks, splittable))
    layout = StateSharding(shards=shards)
    after = defaultdict(list)
    reduced = []
    for p, g in params_grads:
        for s in shards[p.name]:
            if s.cut:
                _declare_chunk(block, g, s)
                if not fused:  # the fused reduce-scatter cuts the rows while packing
                    after[last[g]].append(_slice(block, g, s, OpRole.BACKWARD, owner=None))
            if not fused:
                after[last[g]].append(make_op(block, "c_reduce_sum", {"X": [s.name(g)]},
                                              {"Out": [s.name(g)]}, {"root_id": s.owner},
                                              OpRole.COMMUNICATE))
            reduced.append(s.name(g))
    for bucket in groups:
        members = set(bucket)
        after[max(last[g] for g in bucket)].append(_reduce_scatter(
            block, [(p, g) for p, g in params_grads if g in members], shards,
            nranks if flat else 0))
    start = first_index(block, OpRole.OPTIMIZE) - 1
    after[start].append(make_op(block, "c_sync_comm_stream", {"X": reduced}, {"Out": reduced},
                                {}, OpRole.COMMUNICATE))
    for p, _ in params_grads:  # each owner starts from its rows of the parameter
        for s in shards[p.name]:
            if s.cut:
                _declare_chunk(block, p.name, s)
                after[start].append(_slice(block, p.name, s, OpRole.OPTIMIZE, owner=s.owner))
    removed = _assign_optimize_ops(program, params_grads, shards, layout, after)
    # right after the last update, so any later op that reads a parameter sees the new value
    last_update = max(i for i, op in enumerate(block.ops) if op.role is OpRole.OPTIMIZE)
    after[last_update].extend(
        gather_flat(block, params_grads, groups, shards) if flat else
        _gather_params(block, params_grads, shards, fuse_broadcast, fused))
    place_after(block, after)
    block.ops = [op for op in block.ops if id(op) not in removed]
    return layout


@register_pass("reduce_mode", order=30,
               fields=("reduce_strategy", "fuse_broadcast_ops", "fuse_all_reduce_ops"),
               when=lambda ctx: ctx.strategy.reduce_strategy == ReduceStrategy.Reduce
               and ctx.aggregates_gradients())
def reduce_mode_pass(ctx) -> None:
    """ReduceStrategy.Reduce on several devices: apply_reduce_mode; ctx.sharding says where the
    optimizer state lives."""
    dense = gather_sparse_gradients(ctx.program, ctx.params_grads())
    ctx.sharding = apply_reduce_mode(ctx.program, dense, ctx.num_devices,
                                     ctx.strategy.fuse_broadcast_ops,
                                     ctx.strategy.fuse_all_reduce_ops, ctx.bucket_mb)
    ctx.collectives_added = True


def _reduce_scatter(block, params_grads, shards, flat_ranks: int = 0):
    """One fused reduce-scatter of these gradients: whole gradients in, their pieces out
    (flat_ranks: flat sections over that many ranks, reduce_flat.py)."""
    pieces, owners, sources, spans = [], [], [], []
    for k, (p, g) in enumerate(params_grads):
        for s in shards[p.name]:
            pieces.append(s.name(g))
            owners.append(s.owner)
            sources.append(k)
            spans.append(s.span or (-1, -1))
    return make_op(block, "c_reduce_scatter_owned", {"X": [g for _, g in params_grads]},
                   {"Out": pieces}, {"owners": owners, "sources": sources,
                                     "starts": [a for a, _ in spans],
                                     "ends": [b for _, b in spans], "flat": bool(flat_ranks),
                                     "nranks": flat_ranks}, OpRole.COMMUNICATE)


def _read_before_all_done(block, params_grads, last) -> bool:
    """Whether an op reads a gradient after it is final but before the last gradient is: its
    bucket's reduce-scatter, placed after the bucket's last gradient, might come too late for
    it (then each gradient is reduced right after its last write instead)."""
    grads = {g for _, g in params_grads}
    end = max(last[g] for g in grads)
    return any(n in grads and i > last[n]
               for i, op in enumerate(block.ops[:end + 1]) for n in op.input_arg_names)


def _row_separable(program, params_grads) -> set[str]:
    """Parameters whose optimize ops may run chunk by chunk: each is row-separable (its
    OpDef.row_separable: it acts on each row independently; not lamb or lars_momentum, which
    scale by norms of the whole parameter, nor clip_by_norm or a reduction), or a
    squared_l2_norm whose result only feeds a sum across parameters (global-norm clipping,
    where chunks' partial squares add up). clip_by_norm, say, needs the whole gradient."""
    block = program.global_block()
    deps: dict[str, frozenset] = {}
    for p, g in params_grads:
        mine = frozenset([p.name])
        deps[g] = deps[p.name] = mine
        for state in program.optimizer_state.get(p.name, []):
            deps[state] = mine
    readers: dict[str, list] = defaultdict(list)
    for op in block.ops:
        for n in op.input_arg_names:
            readers[n].append(op)
    ok = {p.name for p, _ in params_grads}
    for op in block.ops:
        if op.role is not OpRole.OPTIMIZE:
            continue
        d = frozenset().union(*(deps.get(n, frozenset()) for n in op.input_arg_names))
        if len(d) == 1:
            partial_sum = op.type == "squared_l2_norm" and all(
                r.type == "sum" for n in op.output_arg_names for r in readers[n])
            if not get_op_def(op.type).row_separable and not partial_sum:
                ok -= d
        for n in op.output_arg_names:
            deps[n] = d if len(d) == 1 else frozenset()
    return ok


def _declare_chunk(block, name: str, s: Shard, persistable=False):
    var = block.vars[name]
    a, b = s.span
    shape = (b - a,) if s.flat is not None else (b - a,) + tuple(var.shape[1:])
    block.create_var(name=s.name(name), shape=shape, dtype=var.dtype, persistable=persistable)


def _slice(block, name, s: Shard, role, owner):
    a, b = s.span
    if s.flat is not None:  # a view of the flattened parameter: no copy
        return make_op(block, "flat_slice", {"X": [name]}, {"Out": [s.name(name)]},
                       {"start": a, "end": b}, role, owner=owner)
    return make_op(block, "slice", {"Input": [name]}, {"Out": [s.name(name)]},
                   {"axes": [0], "starts": [a], "ends": [b]}, role, owner=owner)


def _assign_optimize_ops(program, params_grads, shards, layout, after) -> set:
    """Give owners to optimize ops (cloning those of chunked parameters); returns the ids of
    the ops the clones replace."""
    block = program.global_block()
    deps: dict[str, frozenset] = {}
    state_of = {}
    for p, g in params_grads:
        mine = frozenset([p.name])
        deps[g] = deps[p.name] = mine
        for state in program.optimizer_state.get(p.name, []):
            deps[state] = mine
            state_of[state] = p
    chunked = {}  # var -> its per-chunk names (the gradient, the parameter, chain values)
    for p, g in params_grads:
        if shards[p.name][0].cut:
            chunked[g] = [s.name(g) for s in shards[p.name]]
            chunked[p.name] = [s.name(p.name) for s in shards[p.name]]
    owned_outputs: set[str] = set()  # values only their owner computes (zeros elsewhere)
    removed: set[int] = set()
    for i, op in enumerate(block.ops):
        if op.role is not OpRole.OPTIMIZE:
            continue
        d = frozenset().union(*(deps.get(n, frozenset()) for n in op.input_arg_names))
        if len(d) == 1:
            (pname,) = d
            pshards = shards[pname]
            if not pshards[0].cut:
                op.owner = pshards[0].owner
                owned_outputs.update(op.output_arg_names)
                for n in op.input_arg_names + op.output_arg_names:
                    if n in state_of:
                        layout.state_owner[n] = op.owner
            else:
                removed.add(id(op))
                for s in pshards:
                    clone = _clone_for_chunk(block, op, s, pname, state_of, chunked, layout)
                    after[i].append(clone)
                    owned_outputs.update(clone.output_arg_names)
                for n in op.output_arg_names:
                    chunked[n] = [s.name(n) for s in pshards]
        elif len(d) > 1:
            inputs = [c for n in op.input("X") for c in chunked.get(n, [n])]
            # a sum of terms each computed on its owner only adds up to the whole once
            # allreduced; any other input (a raw gradient, the same on no two ranks) would not
            if op.type != "sum" or not set(inputs) <= owned_outputs:
                raise InvalidArgumentError(
                    f"Reduce mode cannot split op #{i} '{op.type}' across owners: it mixes the "
                    f"gradients of {sorted(d)[:4]}{'...' if len(d) > 4 else ''}; only a sum of "
                    f"per-parameter terms can be (use ReduceStrategy.AllReduce for this model)")
            out = op.output("Out")
            if inputs != op.input("X"):
                removed.add(id(op))
                after[i].append(make_op(block, "sum", {"X": inputs}, {"Out": out}, {},
                                        OpRole.OPTIMIZE))
            after[i].append(make_op(block, "c_allreduce_sum", {"X": out}, {"Out": out}, {},
                                    OpRole.COMMUNICATE))
            after[i].append(make_op(block, "c_sync_comm_stream", {"X": out}, {"Out": out}, {},
                                    OpRole.COMMUNICATE))
            d = frozenset()  # complete after the allreduce: the same on every rank
        for n in op.output_arg_names:
            deps[n] = d
    program.optimizer_state = {p: _state_names(program, p, layout)
                               for p in program.optimizer_state}
    return removed


def _state_names(program, param, layout) -> list[str]:
    names = []
    for var in program.optimizer_state[param]:
        chunks = [n for n, (src, _) in layout.state_source.items() if src == var]
        names.extend(sorted(chunks) if chunks else [var])
    return names


def _clone_for_chunk(block, op, s: Shard, pname, state_of, chunked, layout):
    """`op` rewritten onto chunk `s` of parameter `pname`: the parameter, its gradient, its
    state and the values its earlier ops made for this chunk become the chunk's."""
    param = block.vars[pname]

    def rename(n):
        if n in chunked:
            return chunked[n][s.index]
        if n in state_of and state_of[n].name == pname:
            chunk = s.name(n)
            if not block.has_var(chunk):
                var = block.vars[n]
                whole_rows = tuple(var.shape) == tuple(param.shape)
                if whole_rows:
                    _declare_chunk(block, n, s, persistable=True)
                else:  # per-parameter scalars (Adam's beta powers): one copy per chunk
                    block.create_var(name=chunk, shape=var.shape, dtype=var.dtype,
                                     persistable=True)
                layout.state_source[chunk] = (n, s.span if whole_rows else None)
                if whole_rows and s.flat is not None:
                    layout.state_flat.add(chunk)
                layout.state_owner[chunk] = s.owner
            return chunk
        return n

    ins = {slot: [rename(n) for n in names] for slot, names in op.inputs.items()}
    outs = {slot: [rename(n) if n in state_of or n in chunked else s.name(n) for n in names]
            for slot, names in op.outputs.items()}
    return make_op(block, op.type, ins, outs, dict(op.attrs), OpRole.OPTIMIZE, owner=s.owner)


def _gather_params(block, params_grads, shards, fuse_broadcast, fused):
    """Broadcast every updated parameter or chunk from its owner (fused: all-gather them in
    one call), then put chunked parameters back together on every rank."""
    pieces = [(s.name(p.name), s.owner, p.dtype) for p, _ in params_grads
              for s in shards[p.name]]
    if fused:
        names = [name for name, _, _ in pieces]
        ops = [make_op(block, "c_allgather_owned", {"X": names}, {"Out": names},
                       {"owners": [owner for _, owner, _ in pieces]}, OpRole.COMMUNICATE)]
        return ops + _concat_chunks(block, params_grads, shards)
    if fuse_broadcast:
        groups = defaultdict(list)
        for name, owner, dtype in pieces:
            groups[(owner, dtype)].append(name)
        batches = [(names, owner) for (owner, _), names in sorted(groups.items())]
    else:
        batches = [([name], owner) for name, owner, _ in pieces]
    ops = [make_op(block, "c_broadcast", {"X": names}, {"Out": names}, {"root": root},
                   OpRole.COMMUNICATE) for names, root in batches]
    chunks = [name for p, _ in params_grads if shards[p.name][0].cut
              for name in (s.name(p.name) for s in shards[p.name])]
    if chunks:  # the concats read what the broadcasts write
        ops.append(make_op(block, "c_sync_comm_stream", {"X": chunks}, {"Out": chunks}, {},
                           OpRole.COMMUNICATE))
    return ops + _concat_chunks(block, params_grads, shards)


def _concat_chunks(block, params_grads, shards) -> list:
    return [make_op(block, "concat", {"X": [s.name(p.name) for s in shards[p.name]]},
                    {"Out": [p.name]}, {"axis": 0}, OpRole.OPTIMIZE)
            for p, _ in params_grads if shards[p.name][0].cut]
