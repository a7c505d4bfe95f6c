"""Program._prune_with_input as fluid 1.8 has it (framework.py's target lookup, then the C++
prune): a copy of a program keeping only the ops its targets need, stopping at the fed
variables, with the variables no kept op names dropped.

Walking the global block backwards, an op is kept when it is a target or writes a variable a
kept op reads; a kept op's inputs, but the fed ones, become needed. An optimizer op is kept only
as a target: it reads and writes the parameters, so reaching it through its outputs would pull
in every update of a shared parameter (fluid's rule). A kept control-flow op keeps its
sub-blocks whole and needs every outer variable they read.

>>> import spmd.fluid as fluid
>>> main, startup = fluid.Program(), fluid.Program()
>>> with fluid.program_guard(main, startup):
...     x = fluid.data("x", [None, 2]); y = fluid.layers.relu(x); z = fluid.layers.scale(y)
>>> [op.type for op in prune_with_input(main, [y.name], [z]).global_block().ops]
['scale']
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from .op_role import OpRole


def _as_list(items) -> list:
    if items is None:
        return []
    return list(items) if isinstance(items, (list, tuple, set)) else [items]


def _is_op(item) -> bool:
    return hasattr(item, "output_arg_names") and hasattr(item, "block")


def _is_optimize(op) -> bool:
    return op.role is OpRole.OPTIMIZE


def target_ops(program, feeds: list[str], targets: list) -> list:
    """The ops the targets name: an op as it is; a variable (or name) by the first op of the
    global block writing it, passing over optimizer ops that are not targets themselves; a
    fed variable needs no op. A variable no op writes is a ValueError, as fluid's."""
    found = []
    for t in targets:
        if _is_op(t):
            found.append(t)
            continue
        if isinstance(t, str):
            name = t
        elif hasattr(t, "name") and hasattr(t, "block"):
            name = t.name
        else:
            raise InvalidArgumentError(
                f"All targets of Program._prune_with_input() can only be Variable or "
                f"Operator, but received {type(t)}.")
        if name in feeds:
            continue
        op = next((op for op in program.global_block().ops if name in op.output_arg_names
                   and not (_is_optimize(op) and not any(op is x for x in targets))), None)
        if op is None:
            raise InvalidArgumentError(
                f"The target variable used for pruning should have an associated operator "
                f"that generates it: no op of the global block writes '{name}' (feed it, "
                f"or fetch a variable an op computes)")
        found.append(op)
    return found


def _sub_blocks(op) -> list[int]:
    """The indexes of the blocks `op` runs (a while's body, a cond's branches)."""
    ids = []
    for name, kind in op._block_attr_kinds().items():
        if name not in op.attrs:
            continue
        ids += [op._block_attr_id(name)] if kind == "block" else op._blocks_attr_ids(name)
    return ids


def _reads(program, op, seen=None) -> set[str]:
    """What `op` reads: its inputs and, for a control-flow op, what its sub-blocks' ops read."""
    names = set(op.input_arg_names)
    seen = set() if seen is None else seen
    for idx in _sub_blocks(op):
        if idx in seen:
            continue
        seen.add(idx)
        for inner in program.block(idx).ops:
            names |= _reads(program, inner, seen)
    return names


def _reachable_blocks(program) -> set[int]:
    """Block 0 and the blocks its (kept) ops run, transitively."""
    reach, todo = {0}, [0]
    while todo:
        for op in program.block(todo.pop()).ops:
            for idx in _sub_blocks(op):
                if idx not in reach:
                    reach.add(idx)
                    todo.append(idx)
    return reach


def prune_with_input(program, feeded_var_names, targets):
    """A pruned copy of `program` (see the module docstring): what `targets` (Variables,
    names or Operators) need from `feeded_var_names` (names)."""
    feeds = _as_list(feeded_var_names)
    bad = [n for n in feeds if not isinstance(n, str)]
    if bad:  # fluid 1.8.5's check (a ValueError)
        raise InvalidArgumentError(
            f"All feeded_var_names of Program._prune_with_input() can only be str, but "
            f"received {type(bad[0])}: feeded_var_names must be str (the fed variables' "
            f"names)")
    targets = list(targets) if isinstance(targets, (list, tuple, set)) else [targets]
    wanted = target_ops(program, feeds, targets)
    block = program.global_block()
    wanted_at = {block.ops.index(op) for op in wanted if op.block is block}
    fed, needed, keep = set(feeds), set(), []
    for at in range(len(block.ops) - 1, -1, -1):
        op = block.ops[at]
        if at in wanted_at or (not _is_optimize(op)
                               and any(n in needed for n in op.output_arg_names)):
            needed.update(n for n in _reads(program, op) if n not in fed)
            keep.append(at)
    new = program.clone()
    new_block = new.global_block()
    new_block.ops = [new_block.ops[at] for at in reversed(keep)]
    reach = _reachable_blocks(new)
    named = {n for b in new.blocks if b.idx in reach for op in b.ops
             for n in op.input_arg_names + op.output_arg_names}
    new_block.vars = {n: v for n, v in new_block.vars.items() if n in named}
    new._bump()
    return new
