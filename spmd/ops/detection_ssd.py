"""Op definitions: fluid 1.8's SSD-family detection ops: prior_box, density_prior_box,
box_coder, iou_similarity, bipartite_match, target_assign, mine_hard_examples, box_clip
(kernels in spmd/kernels/detection_ssd.py; the NMS ops are in detection_nms.py, detection_map
in detection_map.py).

None has a gradient in fluid (they make anchors, targets and detections, all stop_gradient);
an SSD's loss differentiates through the dense ops around them (spmd/layers/detection_ssd.py).
Boxes are [xmin, ymin, xmax, ymax]; "normalized" boxes live in [0, 1], others count pixels
(a width is then xmax - xmin + 1, as fluid has it).

>>> # prior_box(Input [N, C, 4, 4], Image [N, 3, 32, 32], min_sizes=[8.]) -> Boxes [4, 4, 1, 4]
"""
from __future__ import annotations

from .registry import define_op

_FLOATS = ("float32", "float64")
_INTS = ("int32", "int64")


def _float_input(ctx, slot: str):
    v = ctx.input(slot)
    ctx.check(v.dtype in _FLOATS, f"{slot} '{v.name}' must be float32 or float64, got {v.dtype}")
    return v


def _known(d: int) -> bool:
    return d is not None and d >= 0


def expand_aspect_ratios(ratios, flip: bool) -> list[float]:
    """1.0 first, then each new ratio (and its inverse with flip), as fluid's prior_box."""
    out = [1.0]
    for r in ratios:
        if any(abs(r - o) < 1e-6 for o in out):
            continue
        out.append(float(r))
        if flip:
            out.append(1.0 / r)
    return out


def prior_count(attrs) -> int:
    return len(expand_aspect_ratios(attrs["aspect_ratios"], attrs["flip"])) * len(
        attrs["min_sizes"]) + len(attrs["max_sizes"])


def _feature_and_image(ctx):
    x, img = ctx.input("Input"), ctx.input("Image")
    ctx.check(len(x.shape) == 4, f"Input must be a 4-D NCHW feature map, got {list(x.shape)}")
    ctx.check(len(img.shape) == 4, f"Image must be a 4-D NCHW image, got {list(img.shape)}")
    return x, img


_VAR4 = ("floats", [0.1, 0.1, 0.2, 0.2])


@define_op("prior_box", inputs=["Input", "Image"], outputs=["Boxes", "Variances"], grad=None,
           attrs={"min_sizes": "floats", "max_sizes": ("floats", []),
                  "aspect_ratios": ("floats", [1.0]), "variances": _VAR4,
                  "flip": ("bool", True), "clip": ("bool", True), "step_w": ("float", 0.0),
                  "step_h": ("float", 0.0), "offset": ("float", 0.5),
                  "min_max_aspect_ratios_order": ("bool", False)})
def _prior_box(ctx):
    x, _ = _feature_and_image(ctx)
    mins, maxs = ctx.attr("min_sizes"), ctx.attr("max_sizes")
    ctx.check(len(mins) > 0 and all(m > 0 for m in mins),
              f"min_sizes must be positive sizes, got {mins}")
    ctx.check(not maxs or len(maxs) == len(mins),
              f"max_sizes must be empty or as long as min_sizes {mins}, got {maxs}")
    ctx.check(all(b > a for a, b in zip(mins, maxs)),
              f"each max_size must be larger than its min_size: {maxs} vs {mins}")
    ctx.check(len(ctx.attr("variances")) == 4,
              f"variances must be 4 floats, got {ctx.attr('variances')}")
    shape = (x.shape[2], x.shape[3], prior_count(ctx.attrs), 4)
    ctx.set_output("Boxes", shape, x.dtype)
    ctx.set_output("Variances", shape, x.dtype)


@define_op("density_prior_box", inputs=["Input", "Image"], outputs=["Boxes", "Variances"],
           grad=None,
           attrs={"variances": _VAR4, "clip": ("bool", True), "step_w": ("float", 0.0),
                  "step_h": ("float", 0.0), "offset": ("float", 0.5),
                  "densities": ("ints", []), "fixed_sizes": ("floats", []),
                  "fixed_ratios": ("floats", []), "flatten_to_2d": ("bool", False)})
def _density_prior_box(ctx):
    x, _ = _feature_and_image(ctx)
    dens, sizes, ratios = (ctx.attr(a) for a in ("densities", "fixed_sizes", "fixed_ratios"))
    ctx.check(len(dens) == len(sizes) and len(dens) > 0,
              f"densities and fixed_sizes must be equally long and not empty, got {dens} and "
              f"{sizes}")
    ctx.check(len(ratios) > 0, "fixed_ratios must not be empty")
    priors = sum(len(ratios) * d * d for d in dens)
    h, w = x.shape[2], x.shape[3]
    if ctx.attr("flatten_to_2d"):
        shape = (h * w * priors if _known(h) and _known(w) else -1, 4)
    else:
        shape = (h, w, priors, 4)
    ctx.set_output("Boxes", shape, x.dtype)
    ctx.set_output("Variances", shape, x.dtype)


@define_op("box_coder", inputs=["PriorBox", "PriorBoxVar?", "TargetBox"], outputs=["OutputBox"],
           grad=None, share_lod=(("TargetBox", "OutputBox"),),
           attrs={"code_type": ("str", "encode_center_size"), "box_normalized": ("bool", True),
                  "axis": ("int", 0), "variance": ("floats", [])})
def _box_coder(ctx):
    prior, target = _float_input(ctx, "PriorBox"), _float_input(ctx, "TargetBox")
    code, axis = ctx.attr("code_type"), ctx.attr("axis")
    ctx.check(code in ("encode_center_size", "decode_center_size"),
              f"code_type must be 'encode_center_size' or 'decode_center_size', got {code!r}")
    ctx.check(axis in (0, 1), f"axis must be 0 or 1, got {axis}")
    ctx.check(len(prior.shape) == 2 and prior.shape[1] in (4, -1),
              f"PriorBox must be [M, 4], got {list(prior.shape)}")
    var = ctx.attr("variance")
    ctx.check(not var or len(var) == 4, f"variance must be 4 floats, got {var}")
    if ctx.has_input("PriorBoxVar"):
        ctx.check(not var, "give the variance as PriorBoxVar or as the attribute, not both")
        pv = ctx.input("PriorBoxVar")
        ctx.check(len(pv.shape) == 2 and pv.shape[1] in (4, -1),
                  f"PriorBoxVar must be [M, 4] like PriorBox, got {list(pv.shape)}")
    if code == "encode_center_size":
        ctx.check(len(target.shape) == 2 and target.shape[1] in (4, -1),
                  f"encode takes TargetBox [N, 4], got {list(target.shape)}")
        ctx.set_output("OutputBox", (target.shape[0], prior.shape[0], 4), target.dtype)
    else:
        ctx.check(len(target.shape) == 3 and target.shape[2] in (4, -1),
                  f"decode takes TargetBox [N, M, 4], got {list(target.shape)}")
        ctx.set_output("OutputBox", target.shape, target.dtype)


@define_op("iou_similarity", inputs=["X", "Y"], outputs=["Out"], grad=None,
           share_lod=(("X", "Out"),), attrs={"box_normalized": ("bool", True)})
def _iou_similarity(ctx):
    x, y = _float_input(ctx, "X"), _float_input(ctx, "Y")
    for slot, v in (("X", x), ("Y", y)):
        ctx.check(len(v.shape) == 2 and v.shape[1] in (4, -1),
                  f"{slot} must be [rows, 4] boxes, got {list(v.shape)}")
    ctx.set_output("Out", (x.shape[0], y.shape[0]), x.dtype)


@define_op("bipartite_match", inputs=["DistMat"],
           outputs=["ColToRowMatchIndices", "ColToRowMatchDist"], grad=None,
           lod_inputs=("DistMat",),
           attrs={"match_type": ("str", "bipartite"), "dist_threshold": ("float", 0.5)})
def _bipartite_match(ctx):
    d = _float_input(ctx, "DistMat")
    ctx.check(len(d.shape) == 2, f"DistMat must be 2-D [rows, columns], got {list(d.shape)}")
    ctx.check(ctx.attr("match_type") in ("bipartite", "per_prediction"),
              f"match_type must be 'bipartite' or 'per_prediction', got "
              f"{ctx.attr('match_type')!r}")
    rows = -1 if d.lod_level else 1
    ctx.set_output("ColToRowMatchIndices", (rows, d.shape[1]), "int32")
    ctx.set_output("ColToRowMatchDist", (rows, d.shape[1]), d.dtype)


@define_op("target_assign", inputs=["X", "MatchIndices", "NegIndices?"],
           outputs=["Out", "OutWeight"], grad=None, lod_inputs=("X", "NegIndices"),
           attrs={"mismatch_value": ("int", 0)})
def _target_assign(ctx):
    x, mi = ctx.input("X"), ctx.input("MatchIndices")
    ctx.check(len(x.shape) == 3, f"X must be a 3-D LoD tensor [rows, P, K], got "
                                 f"{list(x.shape)}")
    ctx.check(x.lod_level == 1, f"X '{x.name}' must carry one level of LoD (rows per image), "
                                f"has lod_level {x.lod_level}")
    ctx.check(len(mi.shape) == 2 and mi.dtype == "int32",
              f"MatchIndices must be int32 [N, P], got {mi.dtype} {list(mi.shape)}")
    if ctx.has_input("NegIndices"):
        neg = ctx.input("NegIndices")
        ctx.check(neg.dtype == "int32", f"NegIndices must be int32, got {neg.dtype}")
    ctx.set_output("Out", (mi.shape[0], mi.shape[1], x.shape[2]), x.dtype)
    ctx.set_output("OutWeight", (mi.shape[0], mi.shape[1], 1), "float32")
    ctx.set_lod_level("Out", 0)
    ctx.set_lod_level("OutWeight", 0)


@define_op("mine_hard_examples", inputs=["ClsLoss", "LocLoss?", "MatchIndices", "MatchDist"],
           outputs=["NegIndices", "UpdatedMatchIndices"], grad=None, lod_outputs=("NegIndices",),
           attrs={"neg_pos_ratio": ("float", 1.0), "neg_dist_threshold": ("float", 0.5),
                  "sample_size": ("int", 0), "mining_type": ("str", "max_negative")})
def _mine_hard_examples(ctx):
    for slot in ("ClsLoss", "LocLoss", "MatchIndices", "MatchDist"):
        if ctx.has_input(slot):
            v = ctx.input(slot)
            ctx.check(len(v.shape) == 2, f"{slot} must be [N, Np], got {list(v.shape)}")
    kind = ctx.attr("mining_type")
    ctx.check(kind in ("max_negative", "hard_example"),
              f"mining_type must be 'max_negative' or 'hard_example', got {kind!r}")
    if kind == "max_negative":
        ctx.check(ctx.attr("neg_pos_ratio") > 0,
                  f"neg_pos_ratio must be > 0, got {ctx.attr('neg_pos_ratio')}")
        ctx.check(0 < ctx.attr("neg_dist_threshold") < 1,
                  f"neg_dist_threshold must be in (0, 1), got {ctx.attr('neg_dist_threshold')}")
    else:
        ctx.check(ctx.attr("sample_size") > 0,
                  f"hard_example mining needs sample_size > 0, got {ctx.attr('sample_size')}")
    mi = ctx.input("MatchIndices")
    ctx.set_output("NegIndices", (-1, 1), "int32")
    ctx.set_output("UpdatedMatchIndices", mi.shape, mi.dtype)
    ctx.set_lod_level("NegIndices", 1)


@define_op("box_clip", inputs=["Input", "ImInfo"], outputs=["Output"], grad=None,
           lod_inputs=("Input",), share_lod=(("Input", "Output"),))
def _box_clip(ctx):
    x, info = _float_input(ctx, "Input"), _float_input(ctx, "ImInfo")
    ctx.check(x.shape[-1] in (4, -1), f"Input's last dimension must be 4, got {list(x.shape)}")
    ctx.check(len(info.shape) == 2 and info.shape[1] in (3, -1),
              f"ImInfo must be [N, 3] (height, width, scale), got {list(info.shape)}")
    ctx.set_output("Output", x.shape, x.dtype)


