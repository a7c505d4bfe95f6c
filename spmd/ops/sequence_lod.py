"""Op definitions: the sequence ops that move, cut, pad or relabel the rows of a LoD tensor
(fluid 1.8's sequence_concat, sequence_slice, sequence_pad / sequence_unpad, sequence_mask,
sequence_reshape, sequence_reverse, sequence_enumerate, sequence_scatter and lod_reset).
spmd/ops/sequence.py holds the ones that compute over sequences; both register on import.

>>> # sequence_reverse(x with LoD [[0, 2, 5]]) -> rows 1, 0, 4, 3, 2, same LoD
"""
from __future__ import annotations

from .registry import define_op
from .sequence import need_lod

_INTS = ("int32", "int64")


@define_op("sequence_concat", inputs=["X*"], outputs=["Out"], grad_uses=("X",),
           lod_inputs=("X",), lod_outputs=("Out",))
def _sequence_concat(ctx):
    xs = ctx.inputs("X")
    ctx.check(len(xs) >= 1, "X needs at least one LoD tensor")
    for x in xs:
        ctx.check(x.lod_level == 1,
                  f"every X must have one level of LoD; '{x.name}' has lod_level "
                  f"{x.lod_level} (declare it with lod_level=1)")
        ctx.check(tuple(x.shape[1:]) == tuple(xs[0].shape[1:]),
                  f"every X must have the same row shape: '{x.name}' has "
                  f"{list(x.shape[1:])}, '{xs[0].name}' {list(xs[0].shape[1:])}")
        ctx.check(x.dtype == xs[0].dtype, f"every X must have one dtype: '{x.name}' is "
                                          f"{x.dtype}, '{xs[0].name}' {xs[0].dtype}")
    ctx.set_output("Out", (-1,) + tuple(xs[0].shape[1:]), xs[0].dtype)
    ctx.set_lod_level("Out", 1)


@define_op("sequence_slice", inputs=["X", "Offset", "Length"], outputs=["Out"],
           no_grad_inputs=("Offset", "Length"), grad_uses=("X", "Offset", "Length"),
           lod_inputs=("X",), lod_outputs=("Out",))
def _sequence_slice(ctx):
    x = ctx.input("X")
    need_lod(ctx, "X", "sequence_slice", one_level=True)
    for slot in ("Offset", "Length"):
        v = ctx.input(slot)
        ctx.check(v.dtype in _INTS, f"{slot} must be int32 or int64, got {v.dtype}")
        # fluid 1.8's InferShape: 2-D, and Offset shaped as Length (the kernel checks their
        # rows against the sequences at run time)
        ctx.check(len(v.shape) == 2, f"{slot} must be 2-D [num_sequences, 1], got shape "
                                     f"{list(v.shape)}")
    off, length = ctx.input("Offset").shape, ctx.input("Length").shape
    ctx.check(all(a == b or -1 in (a, b) for a, b in zip(off, length)),
              f"Offset {list(off)} and Length {list(length)} must have the same shape")
    ctx.set_output("Out", (-1,) + tuple(x.shape[1:]), x.dtype)
    ctx.set_lod_level("Out", 1)


@define_op("sequence_pad", inputs=["X", "PadValue"], outputs=["Out", "Length"],
           attrs={"padded_length": ("int", -1)}, no_grad_inputs=("PadValue",),
           nondiff_outputs=("Length",), grad_uses=("X",), lod_inputs=("X",),
           lod_outputs=("Out", "Length"))
def _sequence_pad(ctx):
    x = ctx.input("X")
    need_lod(ctx, "X", "sequence_pad", one_level=True)
    ctx.check(len(x.shape) >= 2, f"X '{x.name}' must be at least 2-D [rows, width...], got "
                                 f"shape {list(x.shape)}")
    padded = ctx.attr("padded_length")
    ctx.check(padded == -1 or padded > 0,
              f"padded_length must be -1 (the longest sequence) or positive, got {padded}")
    ctx.set_output("Out", (-1, padded) + tuple(x.shape[1:]), x.dtype)
    ctx.set_output("Length", (-1,), "int64")
    ctx.set_lod_level("Out", 0)
    ctx.set_lod_level("Length", 0)


@define_op("sequence_unpad", inputs=["X", "Length"], outputs=["Out"],
           no_grad_inputs=("Length",), grad_uses=("X", "Length"), lod_outputs=("Out",))
def _sequence_unpad(ctx):
    x, length = ctx.input("X"), ctx.input("Length")
    ctx.check(len(x.shape) >= 2, f"X '{x.name}' must be [batch, max_length, ...], got shape "
                                 f"{list(x.shape)}")
    ctx.check(length.dtype == "int64", f"Length must be int64, got {length.dtype}")
    ctx.set_output("Out", (-1,) + tuple(x.shape[2:]) if len(x.shape) > 2 else (-1, 1),
                   x.dtype)
    ctx.set_lod_level("Out", 1)


@define_op("sequence_mask", inputs=["X", "MaxLenTensor?"], outputs=["Y"],
           attrs={"maxlen": ("int", -1), "out_dtype": ("dtype", "int64")}, grad=None)
def _sequence_mask(ctx):
    x = ctx.input("X")
    ctx.check(x.dtype in _INTS, f"X '{x.name}' holds lengths and must be int32 or int64, "
                                f"got {x.dtype}")
    maxlen = ctx.attr("maxlen")
    if ctx.has_input("MaxLenTensor"):
        maxlen = -1
    else:
        ctx.check(maxlen == -1 or maxlen > 0,
                  f"maxlen must be positive, or -1 for the largest value of X; got {maxlen}")
    ctx.set_output("Y", tuple(x.shape) + (maxlen,), ctx.attr("out_dtype"))


@define_op("sequence_reshape", inputs=["X"], outputs=["Out"], attrs={"new_dim": "int"},
           grad_uses=("X",), lod_inputs=("X",), lod_outputs=("Out",))
def _sequence_reshape(ctx):
    x = ctx.input("X")
    need_lod(ctx, "X", "sequence_reshape", one_level=True)
    ctx.check(len(x.shape) == 2, f"X '{x.name}' must be 2-D [rows, width], got shape "
                                 f"{list(x.shape)}")
    ctx.check(ctx.attr("new_dim") > 0, f"new_dim must be positive, got {ctx.attr('new_dim')}")
    ctx.set_output("Out", (-1, ctx.attr("new_dim")), x.dtype)
    ctx.set_lod_level("Out", 1)


@define_op("sequence_reverse", inputs=["X"], outputs=["Y"], grad_uses=("X",),
           lod_inputs=("X",), share_lod=(("X", "Y"),))
def _sequence_reverse(ctx):
    x = ctx.input("X")
    need_lod(ctx, "X", "sequence_reverse", one_level=True)
    ctx.set_output("Y", x.shape, x.dtype)


@define_op("sequence_enumerate", inputs=["X"], outputs=["Out"],
           attrs={"win_size": "int", "pad_value": ("int", 0)}, grad=None,
           lod_inputs=("X",), share_lod=(("X", "Out"),))
def _sequence_enumerate(ctx):
    x = ctx.input("X")
    need_lod(ctx, "X", "sequence_enumerate", one_level=True)
    ctx.check(x.dtype in _INTS, f"X '{x.name}' must hold int32 or int64 ids, got {x.dtype}")
    ctx.check(len(x.shape) == 2 and x.shape[1] in (1, -1),
              f"X '{x.name}' must be [rows, 1], got shape {list(x.shape)}")
    ctx.check(ctx.attr("win_size") > 0,
              f"win_size must be positive, got {ctx.attr('win_size')}")
    ctx.set_output("Out", (x.shape[0], ctx.attr("win_size")), x.dtype)


@define_op("sequence_scatter", inputs=["X", "Ids", "Updates"], outputs=["Out"],
           no_grad_inputs=("Ids",), grad_uses=("Ids", "Updates"),
           lod_inputs=("Ids", "Updates"))
def _sequence_scatter(ctx):
    x, ids, upd = ctx.input("X"), ctx.input("Ids"), ctx.input("Updates")
    need_lod(ctx, "Ids", "sequence_scatter", one_level=True)
    need_lod(ctx, "Updates", "sequence_scatter", one_level=True)
    ctx.check(ids.dtype in _INTS, f"Ids must be int32 or int64, got {ids.dtype}")
    ctx.check(upd.dtype == x.dtype, f"Updates ({upd.dtype}) must have X's dtype ({x.dtype})")
    ctx.check(len(x.shape) >= 2, f"X '{x.name}' must be at least 2-D, got shape "
                                 f"{list(x.shape)}")
    ctx.set_output("Out", x.shape, x.dtype)


@define_op("lod_reset", inputs=["X", "Y?"], outputs=["Out"],
           attrs={"target_lod": ("ints", []), "append": ("bool", False)},
           no_grad_inputs=("Y",), grad_uses=(), lod_inputs=("X", "Y"), lod_outputs=("Out",))
def _lod_reset(ctx):
    x = ctx.input("X")
    if ctx.has_input("Y"):
        y = ctx.input("Y")
        if y.lod_level:
            level = y.lod_level
        else:
            ctx.check(y.dtype in _INTS,
                      f"Y '{y.name}' has no LoD, so its data are the new offsets and must be "
                      f"int32 or int64, got {y.dtype}")
            level = x.lod_level + 1 if ctx.attr("append") else 1
    else:
        ctx.check(bool(ctx.attr("target_lod")),
                  "give the new LoD as Y or as target_lod (offsets, e.g. [0, 2, 5])")
        level = x.lod_level + 1 if ctx.attr("append") else 1
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_lod_level("Out", level)
