"""Op definitions: deformable_psroi_pooling, position-sensitive ROI pooling with learned offsets
(its kernel and gradient in spmd/kernels/detection_deform.py).
"""
from __future__ import annotations

from .detection_roi import _check_nchw, _check_rois, _pooled
from .registry import define_op


@define_op("deformable_psroi_pooling", inputs=["Input", "ROIs", "Trans"],
           outputs=["Output", "TopCount"], no_grad_inputs=("ROIs",),
           nondiff_outputs=("TopCount",), grad_uses=("Input", "ROIs", "Trans"),
           lod_inputs=("ROIs",),
           attrs={"no_trans": ("bool", False), "spatial_scale": ("float", 1.0),
                  "output_dim": "int", "group_size": ("ints", [1, 1]),
                  "pooled_height": ("int", 1), "pooled_width": ("int", 1),
                  "part_size": ("ints", [1, 1]), "sample_per_part": ("int", 1),
                  "trans_std": ("float", 0.1)})
def _deformable_psroi_pooling(ctx):
    x, rois = _check_nchw(ctx, "Input"), _check_rois(ctx)
    ph, pw = _pooled(ctx)
    group, part = ctx.attr("group_size"), ctx.attr("part_size")
    ctx.check(len(group) == 2 and len(part) == 2 and min(group + part) > 0,
              f"group_size and part_size must be 2 positive ints, got {group}, {part}")
    od = ctx.attr("output_dim")
    ctx.check(od > 0 and (x.shape[1] < 0 or x.shape[1] == od * group[0] * group[1]),
              f"Input's channels must be output_dim * group_size[0] * group_size[1] = "
              f"{od * group[0] * group[1]}, got {x.shape[1]}")
    trans = ctx.input("Trans")
    ctx.check(len(trans.shape) == 4, f"Trans must be [R, 2 * classes, part_h, part_w], got "
                                     f"{list(trans.shape)}")
    ctx.check(ctx.attr("sample_per_part") > 0,
              f"sample_per_part must be > 0, got {ctx.attr('sample_per_part')}")
    shape = (rois.shape[0], od, ph, pw)
    ctx.set_output("Output", shape, x.dtype)
    ctx.set_output("TopCount", shape, x.dtype)
