"""ReduceStrategy.Reduce: every parameter gets an owner rank; its gradient is reduced to the
owner, only the owner runs its update (and regularization, clipping) and holds its optimizer
state, then the owner broadcasts the updated parameter.

Owners are assigned greedily by bytes (largest first, ties by name, to the least loaded rank,
ties to the lowest rank): deterministic, so every rank compiles the same graph. Ops are given
owners by data flow: an optimize op that depends on one parameter's gradient, value or state
belongs to that parameter's owner. The one op allowed to mix parameters is a `sum` of
per-parameter terms (global-norm clipping's squared norms): each rank adds its owned terms (the
others read as zeros, see executor/plan.py) and an allreduce completes the sum.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..core.operator import OpRole
from ..errors import InvalidArgumentError
from .common import first_index, last_writer, make_op, place_after


def assign_owners(params, nranks: int) -> dict[str, int]:
    load = [0] * nranks
    owners = {}
    for p in sorted(params, key=lambda p: (-_nbytes(p), p.name)):
        rank = min(range(nranks), key=lambda r: (load[r], r))
        owners[p.name] = rank
        load[rank] += _nbytes(p)
    return owners


def _nbytes(var) -> int:
    return int(np.prod(var.shape)) * np.dtype(var.dtype).itemsize


def apply_reduce_mode(program, params_grads, nranks: int, fuse_broadcast: bool) -> dict:
    """Rewrite `program` in place; returns parameter name -> owner rank."""
    block = program.global_block()
    owners = assign_owners([p for p, _ in params_grads], nranks)
    last = last_writer(block)
    after = defaultdict(list)
    for p, g in params_grads:
        after[last[g]].append(make_op(block, "c_reduce_sum", {"X": [g]}, {"Out": [g]},
                                      {"root_id": owners[p.name]}, OpRole.COMMUNICATE))
    grads = [g for _, g in params_grads]
    after[first_index(block, OpRole.OPTIMIZE) - 1].append(
        make_op(block, "c_sync_comm_stream", {"X": grads}, {"Out": grads}, {},
                OpRole.COMMUNICATE))
    _assign_optimize_ops(program, params_grads, owners, after)
    params = [p.name for p, _ in params_grads]
    if fuse_broadcast:
        groups = [([n for n in params if owners[n] == r], r) for r in range(nranks)]
    else:
        groups = [([n], owners[n]) for n in params]
    broadcasts = [make_op(block, "c_broadcast", {"X": names}, {"Out": names}, {"root": root},
                          OpRole.COMMUNICATE) for names, root in groups if names]
    place_after(block, after, before_end=broadcasts)
    return owners


def _assign_optimize_ops(program, params_grads, owners, after):
    block = program.global_block()
    deps: dict[str, frozenset] = {}
    for p, g in params_grads:
        mine = frozenset([p.name])
        deps[g] = deps[p.name] = mine
        for state in program.optimizer_state.get(p.name, []):
            deps[state] = mine
    owned_outputs: set[str] = set()  # values only their owner computes (zeros elsewhere)
    for i, op in enumerate(block.ops):
        if op.role is not OpRole.OPTIMIZE:
            continue
        d = frozenset().union(*(deps.get(n, frozenset()) for n in op.input_arg_names))
        if len(d) == 1:
            op.owner = owners[next(iter(d))]
            owned_outputs.update(op.output_arg_names)
        elif len(d) > 1:
            # a sum of terms each computed on its owner only adds up to the whole once
            # allreduced; any other input (a raw gradient, the same on no two ranks) would not
            if op.type != "sum" or not set(op.input("X")) <= owned_outputs:
                raise InvalidArgumentError(
                    f"Reduce mode cannot split op #{i} '{op.type}' across owners: it mixes the "
                    f"gradients of {sorted(d)[:4]}{'...' if len(d) > 4 else ''}; only a sum of "
                    f"per-parameter terms can be (use ReduceStrategy.AllReduce for this model)")
            out = op.output("Out")
            after[i].append(make_op(block, "c_allreduce_sum", {"X": out}, {"Out": out}, {},
                                    OpRole.COMMUNICATE))
            after[i].append(make_op(block, "c_sync_comm_stream", {"X": out}, {"Out": out}, {},
                                    OpRole.COMMUNICATE))
            d = frozenset()  # complete after the allreduce: the same on every rank
        for n in op.output_arg_names:
            deps[n] = d
