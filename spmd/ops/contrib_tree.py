"""Op definitions: fluid 1.8's contributed ops of the recommendation models, each its own C++
kernel in fluid: tree_conv (tree-based convolution), tdm_child and tdm_sampler (the tree of a
TDM retrieval model), rank_attention (PaddleRec's rank-aware attention) and filter_by_instag
(instances kept by their tags). Kernels in spmd/kernels/contrib_tree.py.
"""
from __future__ import annotations

from .registry import define_op

_FLOATS = ("float32", "float64")
_INTS = ("int32", "int64")
_DTYPE_CODES = {2: "int32", 3: "int64"}  # fluid's VarType codes of the int outputs


def _int_dtype(ctx, attr: str = "dtype") -> str:
    code = ctx.attr(attr)
    ctx.check(code in _DTYPE_CODES, f"{attr} must be int32 (2) or int64 (3), got {code}")
    return _DTYPE_CODES[code]


@define_op("tree_conv", inputs=["NodesVector", "EdgeSet", "Filter"], outputs=["Out"],
           attrs={"max_depth": ("int", 2)}, no_grad_inputs=("EdgeSet",),
           grad_uses=("NodesVector", "EdgeSet", "Filter"))
def _tree_conv(ctx):
    nodes, edges, w = ctx.input("NodesVector"), ctx.input("EdgeSet"), ctx.input("Filter")
    ctx.check(len(nodes.shape) == 3 and nodes.dtype in _FLOATS,
              f"NodesVector must be float [batch, max nodes, feature], got {nodes.dtype} "
              f"{list(nodes.shape)}")
    ctx.check(len(edges.shape) == 3 and edges.shape[2] in (2, -1) and edges.dtype in _INTS,
              f"EdgeSet must be int [batch, max edges, 2] (parent, child node ids from 1), "
              f"got {edges.dtype} {list(edges.shape)}")
    ctx.check(len(w.shape) == 4 and w.shape[1] == 3 and w.shape[0] == nodes.shape[2],
              f"Filter must be [feature {nodes.shape[2]}, 3, output size, filters], got "
              f"{list(w.shape)}")
    ctx.check(ctx.attr("max_depth") >= 1, f"max_depth must be >= 1, got {ctx.attr('max_depth')}")
    ctx.set_output("Out", (nodes.shape[0], nodes.shape[1], w.shape[2], w.shape[3]), nodes.dtype)


@define_op("tdm_child", inputs=["X", "TreeInfo"], outputs=["Child", "LeafMask"], grad=None,
           attrs={"child_nums": ("int", 1), "dtype": ("int", 2)})
def _tdm_child(ctx):
    x, info = ctx.input("X"), ctx.input("TreeInfo")
    ctx.check(x.dtype in _INTS, f"X must hold int32 / int64 node ids, got {x.dtype}")
    ctx.check(info.dtype in _INTS and len(info.shape) == 2,
              f"TreeInfo must be int [nodes, 3 + child_nums], got {info.dtype} "
              f"{list(info.shape)}")
    child_nums = ctx.attr("child_nums")
    ctx.check(child_nums >= 1 and info.shape[1] in (3 + child_nums, -1),
              f"TreeInfo's width must be 3 + child_nums = {3 + child_nums}, got "
              f"{info.shape[1]}")
    dtype = _int_dtype(ctx)
    shape = tuple(x.shape) + (child_nums,)
    ctx.set_output("Child", shape, dtype)
    ctx.set_output("LeafMask", shape, dtype)


@define_op("tdm_sampler", inputs=["X", "Travel", "Layer"], outputs=["Out", "Labels", "Mask"],
           grad=None, random=True,
           attrs={"neg_samples_num_list": ("ints", []), "layer_offset_lod": ("ints", []),
                  "output_positive": ("bool", True), "seed": ("int", 0),
                  "dtype": ("int", 2)})
def _tdm_sampler(ctx):
    x, travel, layer = ctx.input("X"), ctx.input("Travel"), ctx.input("Layer")
    ctx.check(x.dtype in _INTS, f"X must hold int32 / int64 leaf ids, got {x.dtype}")
    ctx.check(travel.dtype in _INTS and layer.dtype == travel.dtype,
              f"Travel and Layer must be one int dtype, got {travel.dtype} and {layer.dtype}")
    negs, offsets = ctx.attr("neg_samples_num_list"), ctx.attr("layer_offset_lod")
    ctx.check(len(offsets) == len(negs) + 1,
              f"layer_offset_lod needs one entry more than neg_samples_num_list "
              f"({len(negs)} layers), got {offsets}")
    ctx.check(len(travel.shape) == 2 and travel.shape[1] in (len(negs), -1),
              f"Travel must be [leaves, layers = {len(negs)}], got {list(travel.shape)}")
    width = sum(negs) + len(negs) * int(ctx.attr("output_positive"))
    dtype = _int_dtype(ctx)
    rows = x.shape[0] if len(x.shape) and x.shape[0] >= 0 and all(
        d == 1 for d in x.shape[1:]) else -1
    for slot in ("Out", "Labels", "Mask"):
        ctx.set_output(slot, (rows, width), dtype)


@define_op("rank_attention", inputs=["X", "RankOffset", "RankParam"], outputs=["Out"],
           attrs={"MaxRank": ("int", 3), "MaxSize": ("int", 0)},
           no_grad_inputs=("X", "RankOffset"), grad_uses=("X", "RankOffset", "RankParam"))
def _rank_attention(ctx):
    x, offset, param = ctx.input("X"), ctx.input("RankOffset"), ctx.input("RankParam")
    rank = ctx.attr("MaxRank")
    ctx.check(len(x.shape) == 2 and x.dtype in _FLOATS,
              f"X must be float [instances, D], got {x.dtype} {list(x.shape)}")
    ctx.check(len(offset.shape) == 2 and offset.dtype in _INTS
              and offset.shape[1] in (2 * rank + 1, -1),
              f"RankOffset must be int [instances, 2 * MaxRank + 1 = {2 * rank + 1}], got "
              f"{offset.dtype} {list(offset.shape)}")
    ctx.check(len(param.shape) == 2 and param.shape[0] == x.shape[1] * rank * rank,
              f"RankParam must be [D * MaxRank * MaxRank = {x.shape[1] * rank * rank}, out], "
              f"got {list(param.shape)}")
    ctx.set_output("Out", (x.shape[0], param.shape[1]), x.dtype)


@define_op("filter_by_instag", inputs=["Ins", "Ins_tag", "Filter_tag"],
           outputs=["Out", "LossWeight", "IndexMap"],
           attrs={"is_lod": ("bool", True), "out_val_if_empty": ("int", 0)},
           no_grad_inputs=("Ins_tag", "Filter_tag"), nondiff_outputs=("LossWeight", "IndexMap"),
           grad_uses=("Ins", "Ins_tag", "Filter_tag"), lod_inputs=("Ins", "Ins_tag"),
           lod_outputs=("Out", "LossWeight", "IndexMap"))
def _filter_by_instag(ctx):
    ins, tag, filt = ctx.input("Ins"), ctx.input("Ins_tag"), ctx.input("Filter_tag")
    ctx.check(tag.dtype == "int64" and filt.dtype == "int64",
              f"Ins_tag and Filter_tag must be int64, got {tag.dtype} and {filt.dtype}")
    ctx.check(tag.lod_level >= 1, f"Ins_tag '{tag.name}' must carry one LoD level (the tags "
                                  f"of each instance); declare it with lod_level=1")
    # fluid's kernel copies whole rows; Paddle's own test passes a [-1, 32, 1] Ins
    ctx.check(len(ins.shape) >= 2, f"Ins must be at least 2-D [rows, width...], got "
                                   f"{list(ins.shape)}")
    ctx.set_output("Out", (-1, *ins.shape[1:]), ins.dtype)
    ctx.set_output("LossWeight", (-1, 1), "float32")
    ctx.set_output("IndexMap", (-1, 3), "int64")
    for slot in ("Out", "LossWeight", "IndexMap"):
        ctx.set_lod_level(slot, 1)
