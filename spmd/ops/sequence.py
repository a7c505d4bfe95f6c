"""Op definitions: the sequence ops, which read the LoD of their input (spmd/core/lod.py).

A sequence op's kernel gets the LoD of its `lod_inputs` as `ins["X@LOD"]` (a tuple of offset
levels, or None when the variable carries none) and returns the LoD of its `lod_outputs` as
`res["Out@LOD"]`; shape inference sets the outputs' lod_level. Gradients read the forward
input's LoD the same way and carry none themselves.

>>> # sequence_pool(x with LoD [[0, 2, 5]], "SUM") -> 2 rows, one per sequence
"""
from __future__ import annotations

from .registry import define_op

POOL_TYPES = ("AVERAGE", "SUM", "SQRT", "LAST", "FIRST", "MAX")


@define_op("sequence_pool", inputs=["X"], outputs=["Out", "MaxIndex?"],
           attrs={"pooltype": ("str", "AVERAGE"), "is_test": ("bool", False),
                  "pad_value": ("float", 0.0)},
           nondiff_outputs=("MaxIndex",), grad_uses=("X", "MaxIndex"),
           lod_inputs=("X",), lod_outputs=("Out",))
def _sequence_pool(ctx):
    x = ctx.input("X")
    pooltype = ctx.attr("pooltype")
    ctx.check(pooltype in POOL_TYPES,
              f"pooltype '{pooltype}' is not one of {list(POOL_TYPES)}")
    ctx.check(x.lod_level >= 1,
              f"X '{x.name}' has lod_level {x.lod_level}; sequence_pool pools the sequences "
              f"of a LoD tensor: declare the data variable with lod_level=1 and feed a "
              f"LoDTensor")
    shape = (-1,) + tuple(x.shape[1:])
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("MaxIndex", shape, "int32")
    ctx.set_lod_level("Out", x.lod_level - 1)


def need_lod(ctx, slot: str, op: str, one_level: bool = False) -> None:
    """Fail at build time when input `slot` carries no LoD (or more than one level where the
    op reads a single level), saying how to declare it."""
    v = ctx.input(slot)
    ctx.check(v.lod_level >= 1,
              f"input {slot} '{v.name}' has lod_level 0; {op} works on the sequences of a LoD "
              f"tensor: declare the data variable with lod_level=1 and feed a LoDTensor")
    if one_level:
        ctx.check(v.lod_level == 1,
                  f"input {slot} '{v.name}' has lod_level {v.lod_level}; {op} takes one level "
                  f"of LoD, as fluid 1.8's (lod_reset(x, target_lod=...) gives it one)")


def _rows(info) -> int:
    return int(info.shape[0]) if info.shape else -1


@define_op("sequence_conv", inputs=["X", "Filter"], outputs=["Out"],
           attrs={"contextLength": "int", "contextStart": ("int", 0),
                  "contextStride": ("int", 1), "paddingTrainable": ("bool", False)},
           grad_uses=("X", "Filter"), lod_inputs=("X",), share_lod=(("X", "Out"),))
def _sequence_conv(ctx):
    x, w = ctx.input("X"), ctx.input("Filter")
    need_lod(ctx, "X", "sequence_conv", one_level=True)
    length = ctx.attr("contextLength")
    ctx.check(length > 0, f"contextLength must be positive, got {length}")
    ctx.check(ctx.attr("contextStride") == 1,
              f"contextStride must be 1 (fluid 1.8 supports no other), got "
              f"{ctx.attr('contextStride')}")
    ctx.check(not ctx.attr("paddingTrainable"),
              "paddingTrainable=True (learned padding rows from PaddingData) is not supported: "
              "fluid.layers.sequence_conv never sets it; use paddingTrainable=False (zero "
              "padding)")
    ctx.check(len(x.shape) == 2, f"X must be 2-D [rows, width], got shape {list(x.shape)}")
    ctx.check(len(w.shape) == 2, f"Filter must be 2-D, got shape {list(w.shape)}")
    if x.shape[1] != -1 and w.shape[0] != -1:
        ctx.check(w.shape[0] == length * x.shape[1],
                  f"Filter has {w.shape[0]} rows, expected contextLength * X width = "
                  f"{length} * {x.shape[1]} = {length * x.shape[1]}")
    ctx.set_output("Out", (_rows(x), w.shape[1]), x.dtype)


@define_op("row_conv", inputs=["X", "Filter"], outputs=["Out"], grad_uses=("X", "Filter"),
           lod_inputs=("X",), share_lod=(("X", "Out"),))
def _row_conv(ctx):
    x, w = ctx.input("X"), ctx.input("Filter")
    if x.lod_level:
        ctx.check(x.lod_level == 1 and len(x.shape) == 2,
                  f"X '{x.name}' must be [rows, width] with one level of LoD, or a 3-D "
                  f"[batch, time, width] tensor without LoD; got shape {list(x.shape)} with "
                  f"lod_level {x.lod_level}")
    else:
        ctx.check(len(x.shape) == 3,
                  f"X '{x.name}' has no LoD, so it must be 3-D [batch, time, width]; got "
                  f"shape {list(x.shape)} (declare it with lod_level=1 for sequences)")
    ctx.check(len(w.shape) == 2 and -1 in (w.shape[1], x.shape[-1]) or
              w.shape[1] == x.shape[-1],
              f"Filter must be [future_context_size + 1, {x.shape[-1]}] (one weight per "
              f"future row and column of X), got {list(w.shape)}")
    ctx.set_output("Out", x.shape, x.dtype)


@define_op("sequence_softmax", inputs=["X"], outputs=["Out"],
           attrs={"use_cudnn": ("bool", False), "data_format": ("str", "AnyLayout")},
           grad_uses=("X", "Out"), lod_inputs=("X",), share_lod=(("X", "Out"),))
def _sequence_softmax(ctx):
    x = ctx.input("X")
    need_lod(ctx, "X", "sequence_softmax")
    # one score per row is checked at run time, as fluid's kernel does (its InferShape
    # only shares X's dims)
    ctx.set_output("Out", x.shape, x.dtype)


@define_op("sequence_expand", inputs=["X", "Y"], outputs=["Out"],
           attrs={"ref_level": ("int", -1)}, no_grad_inputs=("Y",), grad_uses=("X", "Y"),
           lod_inputs=("X", "Y"), lod_outputs=("Out",))
def _sequence_expand(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    need_lod(ctx, "Y", "sequence_expand")
    ctx.check(x.lod_level <= 1,
              f"X '{x.name}' has lod_level {x.lod_level}; sequence_expand takes X with at "
              f"most one level")
    ref = ctx.attr("ref_level")
    ctx.check(-1 <= ref < y.lod_level,
              f"ref_level {ref} is not a level of Y '{y.name}' (lod_level {y.lod_level}): "
              f"give -1 (the last) or 0..{y.lod_level - 1}")
    ctx.check(len(x.shape) >= 1, "X must have at least one dimension")
    ctx.set_output("Out", (-1,) + tuple(x.shape[1:]), x.dtype)
    ctx.set_lod_level("Out", 1)


@define_op("sequence_expand_as", inputs=["X", "Y"], outputs=["Out"], no_grad_inputs=("Y",),
           grad_uses=("X", "Y"), lod_inputs=("Y",), lod_outputs=("Out",))
def _sequence_expand_as(ctx):
    x = ctx.input("X")
    need_lod(ctx, "Y", "sequence_expand_as", one_level=True)
    ctx.set_output("Out", (-1,) + tuple(x.shape[1:]), x.dtype)
    ctx.set_lod_level("Out", 1)


