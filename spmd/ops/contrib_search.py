"""Op definitions: fluid 1.8's contributed ops of the search / text-matching models
(fluid.contrib.layers match_matrix_tensor, sequence_topk_avg_pooling, var_conv_2d,
search_pyramid_hash), each its own C++ kernel in fluid; spmd's kernels are in
spmd/kernels/contrib_search.py.

They work on one-level LoD tensors whose sequences are flattened 2-D maps: a "row" LoD and a
"column" LoD give each sequence's height and width, and a sequence of X holds
channels * height * width values (X is [total, 1]). Outputs are LoD tensors of that form too.
"""
from __future__ import annotations

from .registry import define_op
from .sequence import need_lod

_FLOATS = ("float32", "float64")


def _float_input(ctx, slot: str, rank: int):
    v = ctx.input(slot)
    ctx.check(len(v.shape) == rank, f"{slot} '{v.name}' must be {rank}-D, got shape "
                                    f"{list(v.shape)}")
    ctx.check(v.dtype in _FLOATS, f"{slot} '{v.name}' must be float32 or float64, got "
                                  f"{v.dtype}")
    return v


@define_op("match_matrix_tensor", inputs=["X", "Y", "W"], outputs=["Out", "Tmp"],
           attrs={"dim_t": ("int", 1)}, grad_uses=("X", "Y", "W"),
           nondiff_outputs=("Tmp",), lod_inputs=("X", "Y"), lod_outputs=("Out",))
def _match_matrix_tensor(ctx):
    x, y = _float_input(ctx, "X", 2), _float_input(ctx, "Y", 2)
    w = _float_input(ctx, "W", 3)
    dim_t = ctx.attr("dim_t")
    need_lod(ctx, "X", "match_matrix_tensor")
    need_lod(ctx, "Y", "match_matrix_tensor")
    ctx.check(dim_t >= 1, f"dim_t must be >= 1, got {dim_t}")
    ctx.check(tuple(w.shape) == (x.shape[1], dim_t, y.shape[1]),
              f"W must be [X's width {x.shape[1]}, dim_t {dim_t}, Y's width {y.shape[1]}], "
              f"got {list(w.shape)}")
    ctx.set_output("Out", (-1, 1), x.dtype)
    ctx.set_output("Tmp", (-1, 1), x.dtype)
    ctx.set_lod_level("Out", 1)


@define_op("sequence_topk_avg_pooling", inputs=["X", "ROW", "COLUMN"], outputs=["Out", "pos"],
           attrs={"topks": "ints", "channel_num": "int"}, grad_uses=("X", "ROW", "COLUMN"),
           no_grad_inputs=("ROW", "COLUMN"), nondiff_outputs=("pos",),
           lod_inputs=("X", "ROW", "COLUMN"), lod_outputs=("Out",))
def _sequence_topk_avg_pooling(ctx):
    x = _float_input(ctx, "X", 2)
    topks, channels = ctx.attr("topks"), ctx.attr("channel_num")
    for slot in ("X", "ROW", "COLUMN"):
        need_lod(ctx, slot, "sequence_topk_avg_pooling")
    ctx.check(len(topks) >= 1 and all(k >= 1 for k in topks)
              and all(a < b for a, b in zip(topks, topks[1:])),
              f"topks must be increasing positive ints, got {topks}")
    ctx.check(channels >= 1, f"channel_num must be >= 1, got {channels}")
    ctx.set_output("Out", (-1, channels * len(topks)), x.dtype)
    ctx.set_output("pos", (-1,), "int32")
    ctx.set_lod_level("Out", 1)


@define_op("var_conv_2d", inputs=["X", "ROW", "COLUMN", "W"], outputs=["Out", "Col"],
           attrs={"InputChannel": ("int", 1), "OutputChannel": ("int", 1),
                  "StrideH": ("int", 1), "StrideW": ("int", 1), "KernelH": ("int", 1),
                  "KernelW": ("int", 1)},
           grad_uses=("X", "ROW", "COLUMN", "W"), no_grad_inputs=("ROW", "COLUMN"),
           nondiff_outputs=("Col",), lod_inputs=("X", "ROW", "COLUMN"),
           lod_outputs=("Out", "Col"))
def _var_conv_2d(ctx):
    x, w = _float_input(ctx, "X", 2), _float_input(ctx, "W", 2)
    for slot in ("X", "ROW", "COLUMN"):
        need_lod(ctx, slot, "var_conv_2d")
    a = {k: ctx.attr(k) for k in ("InputChannel", "OutputChannel", "StrideH", "StrideW",
                                  "KernelH", "KernelW")}
    ctx.check(min(a.values()) >= 1, f"channels, strides and kernel sizes must be >= 1, got {a}")
    ctx.check(x.shape[1] in (1, -1), f"X must be [total, 1] (each sequence a flattened "
                                     f"channels x height x width map), got {list(x.shape)}")
    want = (a["OutputChannel"], a["InputChannel"] * a["KernelH"] * a["KernelW"])
    ctx.check(tuple(w.shape) == want, f"W must be [OutputChannel, InputChannel * KernelH * "
                                      f"KernelW] = {list(want)}, got {list(w.shape)}")
    ctx.set_output("Out", (-1, 1), x.dtype)
    ctx.set_output("Col", (-1, 1), x.dtype)
    ctx.set_lod_level("Out", 1)
    ctx.set_lod_level("Col", 1)


@define_op("pyramid_hash", inputs=["X", "W", "WhiteList?", "BlackList?"],
           outputs=["Out", "DropPos", "X_Temp_Out"], grad=None,
           attrs={"num_emb": ("int", 0), "space_len": ("int", 0), "pyramid_layer": ("int", 2),
                  "rand_len": ("int", 0), "drop_out_percent": ("float", 0.0),
                  "is_training": ("int", 0), "use_filter": ("bool", True),
                  "white_list_len": ("int", 0), "black_list_len": ("int", 0),
                  "seed": ("int", 0), "lr": ("float", 0.0),
                  "distribute_update_vars": ("str", "")},
           lod_inputs=("X",), lod_outputs=("Out", "DropPos"))
def _pyramid_hash(ctx):
    """No gradient: fluid 1.8.5's layer freezes the table (W.stop_gradient) and the ids are
    ints, so its backward never holds a pyramid_hash_grad either."""
    x, w = ctx.input("X"), ctx.input("W")
    a = {k: ctx.attr(k) for k in ("num_emb", "space_len", "pyramid_layer", "rand_len")}
    ctx.check(x.dtype == "int32" and len(x.shape) == 2,
              f"X must be int32 [ids, 1] with one LoD level, got {x.dtype} {list(x.shape)}")
    need_lod(ctx, "X", "pyramid_hash")
    ctx.check(a["pyramid_layer"] >= 2, f"pyramid_layer must be >= 2, got {a['pyramid_layer']}")
    ctx.check(a["rand_len"] >= 1 and a["num_emb"] % a["rand_len"] == 0,
              f"num_emb ({a['num_emb']}) must be a multiple of rand_len ({a['rand_len']})")
    ctx.check(a["space_len"] >= 1, f"space_len must be >= 1, got {a['space_len']}")
    ctx.check(tuple(w.shape) == (a["space_len"] + a["rand_len"], 1),
              f"W must be [space_len + rand_len, 1] = [{a['space_len'] + a['rand_len']}, 1], "
              f"got {list(w.shape)}")
    ctx.set_output("Out", (-1, a["num_emb"]), w.dtype)
    ctx.set_output("DropPos", (-1, 1), "int32")
    ctx.set_output("X_Temp_Out", tuple(x.shape), w.dtype)
    ctx.set_lod_level("Out", 1)
    ctx.set_lod_level("DropPos", 1)
