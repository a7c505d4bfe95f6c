"""Executor.run(use_prune=True) as fluid 1.8 has it: the program run is pruned to what the
fetches (and the optimizer ops) need from the feeds, once per (program, feed names, fetch
list), and the feeds the pruned program no longer names are dropped with a warning.

The fetch list may hold optimizer ops, a list of them, or what Optimizer.minimize returns
((optimize_ops, params_grads)): those run the named optimizer only (and switch pruning on);
without any, a pruned program keeps every optimizer op of the program, so a training program
still trains.
"""
from __future__ import annotations

import copy
import warnings

from ..errors import ArgumentTypeError


def _is_op(item) -> bool:
    return hasattr(item, "_is_optimize_op") and hasattr(item, "output_arg_names")


def split_optimize_ops(fetch_list) -> tuple[list, list]:
    """(the fetch list without ops, the optimizer ops it named), as fluid's
    Executor._split_optimize_ops_in_fetch_list: a list item is a list of ops or names, a
    tuple item is minimize()'s (optimize_ops, params_grads); a non-optimizer op is a TypeError."""
    fetches, ops = [], []

    def take(item):
        if _is_op(item):
            if not item._is_optimize_op():
                raise ArgumentTypeError(
                    f"The operator in fetch_list is not an optimize_op: '{item.type}' (put an "
                    f"optimizer's ops, or what minimize() returns, in fetch_list)")
            ops.append(item)
        elif isinstance(item, str) or (hasattr(item, "name") and hasattr(item, "block")):
            fetches.append(item)
        else:
            raise ArgumentTypeError(
                f"fetch_list items must be str, Variable or optimize_op (an optimizer's op, or "
                f"what minimize() returns), but received {type(item)}.")

    for item in fetch_list:
        if isinstance(item, list):
            for inner in item:
                take(inner)
        elif isinstance(item, tuple):
            for inner in item[0]:
                take(inner)
        else:
            take(item)
    return fetches, ops


def _item_key(item) -> str:
    if isinstance(item, tuple):
        item = item[0]
    if isinstance(item, list):
        return ",".join(_item_key(i) for i in item)
    if isinstance(item, str):
        return item
    if _is_op(item):
        return f"op{id(item)}"
    return item.name


def feed_names(feed) -> list[str]:
    if isinstance(feed, dict):
        return list(feed)
    if isinstance(feed, (list, tuple)):
        return [name for each in feed for name in each]
    return []


def cache_key(program, feed, fetch_list) -> tuple:
    """What a pruned program is cached under: the program (and its version: a program edited
    since is pruned again), the feed names and the fetch list as given (its ops included)."""
    source = getattr(program, "program", program)
    return (id(program), source.version, tuple(feed_names(feed)),
            tuple(_item_key(f) for f in fetch_list))


def prune(program, feed, fetch_list, optimize_ops):
    """fluid's Executor._prune_program: `program` (a Program, or a CompiledProgram whose
    Program is replaced) pruned to `fetch_list` and `optimize_ops` (every optimizer op of the
    program when none is named) from the feeds."""
    from .compiled import CompiledProgram

    source = program.program if isinstance(program, CompiledProgram) else program
    if not optimize_ops:
        optimize_ops = [op for block in source.blocks for op in block.ops
                        if op._is_optimize_op()]
    pruned = source._prune_with_input(feed_names(feed), list(fetch_list) + list(optimize_ops))
    if isinstance(program, CompiledProgram):
        # the copy made for the cache runs the pruned program, compiled afresh on first run
        program._program = pruned
        program._job = None
        program._one_place = None
        program._bound = None
        return program
    return pruned


def compiled_copy(program, shared):
    """A copy of CompiledProgram `program` to prune and cache, sharing the variables of
    `shared` (the first pruned copy of the same program, None for the first), as fluid's."""
    new = copy.copy(program)
    if shared is not None:
        new._share_vars_from = shared
    return new


def update_feed(program, feed):
    """Drop the feeds the pruned program does not name (fluid warns and drops them)."""
    block = getattr(program, "program", program).global_block()

    def keep(each: dict) -> dict:
        for name in [n for n in each if not block.has_var(n)]:
            each.pop(name)
            warnings.warn(f"The variable {name} is not found in program. It is not declared "
                          f"or is pruned.", stacklevel=3)
        return each

    if isinstance(feed, dict):
        return keep(dict(feed))
    if isinstance(feed, (list, tuple)):
        return [keep(dict(each)) for each in feed]
    return feed
