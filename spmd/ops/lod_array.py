"""Op definitions: the LoD tensor-array ops DynamicRNN is built on, as fluid 1.8 has them.

- `lod_rank_table`: the sequences of one LoD level as (index, length) items, longest first
  (a stable sort, so equal lengths keep their order); the levels above it are kept as the
  table's coarse LoD. Its run-time value is a LoDRankTable (spmd/kernels/lod_array.py).
- `max_sequence_len`: the first item's length, int64 [1].
- `lod_tensor_to_array`: time step t of every sequence still running at t, in rank order,
  as element t of a tensor array; `array_to_lod_tensor` is its inverse.
- `shrink_rnn_memory` (fluid.layers.control_flow.shrink_memory): the first rows of a memory,
  one per sequence still running at step I (its leading sequences for a LoD memory).
- `reorder_lod_tensor_by_rank`: whole sequences (rows without LoD) in the table's order.

The differentiable ones read their forward input's LoD in the gradient, so a gradient needs
no LoD of its own. A tensor array's elements carry LoD only when the level split off has
levels below it: the array variable is then LoD-tracked, and its LoD value is the list of
its elements' LoDs.
"""
from __future__ import annotations

from .registry import define_op

RANK_TABLE = "LOD_RANK_TABLE"


def _check_table(ctx, slot="RankTable"):
    t = ctx.input(slot)
    ctx.check(t is not None, f"input {slot} is required (a fluid.layers.control_flow."
                             f"lod_rank_table(x) result)")


@define_op("lod_rank_table", inputs=["X"], outputs=["Out"], attrs={"level": ("int", 0)},
           grad=None, lod_inputs=("X",))
def _lod_rank_table(ctx):
    x, level = ctx.input("X"), ctx.attr("level")
    ctx.check(level >= 0, f"level must be >= 0, got {level}")
    ctx.check(x.lod_level > level,
              f"X '{x.name}' has lod_level {x.lod_level}, so it has no LoD level {level}; "
              f"declare it with lod_level={level + 1} (or more) and feed a LoDTensor")
    ctx.set_output("Out", (), "int64")


@define_op("max_sequence_len", inputs=["RankTable"], outputs=["Out"], grad=None)
def _max_sequence_len(ctx):
    _check_table(ctx)
    ctx.set_output("Out", (1,), "int64")


@define_op("lod_tensor_to_array", inputs=["X", "RankTable"], outputs=["Out"],
           no_grad_inputs=("RankTable",), grad_uses=("X", "RankTable"),
           lod_inputs=("X",), lod_outputs=("Out",))
def _lod_tensor_to_array(ctx):
    x = ctx.input("X")
    _check_table(ctx)
    ctx.check(x.lod_level >= 1,
              f"X '{x.name}' has lod_level 0; lod_tensor_to_array splits the sequences of a "
              f"LoD tensor: declare it with lod_level=1 and feed a LoDTensor")
    ctx.set_output("Out", (-1, *x.shape[1:]), x.dtype)
    # fluid 1.8's InferShape: the elements keep the levels below the table's, x's lod_level
    # - 1 (DynamicRNN's step input of a 1-level x has none). A tensor array's run-time LoD
    # (its elements' LoDs) is carried whatever its lod_level (executor/lod_binding.py), so
    # a fed x with more levels than declared still comes back whole from array_to_lod_tensor
    ctx.set_lod_level("Out", x.lod_level - 1)


@define_op("array_to_lod_tensor", inputs=["X", "RankTable"], outputs=["Out"],
           no_grad_inputs=("RankTable",), grad_uses=("X", "RankTable"),
           lod_inputs=("X",), lod_outputs=("Out",))
def _array_to_lod_tensor(ctx):
    x = ctx.input("X")
    _check_table(ctx)
    ctx.set_output("Out", (-1, *x.shape[1:]), x.dtype)
    ctx.set_lod_level("Out", x.lod_level + 1)


@define_op("shrink_rnn_memory", inputs=["X", "I", "RankTable"], outputs=["Out"],
           no_grad_inputs=("I", "RankTable"), grad_uses=("X",),
           lod_inputs=("X",), lod_outputs=("Out",))
def _shrink_rnn_memory(ctx):
    x, i = ctx.input("X"), ctx.input("I")
    _check_table(ctx)
    ctx.check(i.dtype == "int64", f"I '{i.name}' must be int64, got {i.dtype}")
    ctx.set_output("Out", (-1, *x.shape[1:]), x.dtype)
    ctx.set_lod_level("Out", x.lod_level)


@define_op("reorder_lod_tensor_by_rank", inputs=["X", "RankTable"], outputs=["Out"],
           no_grad_inputs=("RankTable",), grad_uses=("X", "RankTable"),
           lod_inputs=("X",), lod_outputs=("Out",))
def _reorder_lod_tensor_by_rank(ctx):
    x = ctx.input("X")
    _check_table(ctx)
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_lod_level("Out", x.lod_level)
