"""Op definitions: fluid 1.8's ROI-pooling ops: roi_align, roi_pool, psroi_pool, prroi_pool
(kernels in spmd/kernels/detection_roi.py; the YOLO and anchor ops in detection_yolo.py,
deformable_psroi_pooling in detection_deform.py, roi_perspective_transform in
detection_perspective.py).

ROIs are [R, 4] boxes (x1, y1, x2, y2) in input pixels; which image each one belongs to comes,
as in fluid, from the ROIs' LoD (rois per image) or from a RoisLod / BatchRoINums input.
"""
from __future__ import annotations

from .registry import define_op

_FLOATS = ("float32", "float64", "float16")


def _check_nchw(ctx, slot: str):
    x = ctx.input(slot)
    ctx.check(len(x.shape) == 4, f"{slot} must be 4-D NCHW, got {list(x.shape)}")
    ctx.check(x.dtype in _FLOATS, f"{slot} must be float32 or float64, got {x.dtype}")
    return x


def _check_rois(ctx):
    rois = ctx.input("ROIs")
    ctx.check(len(rois.shape) == 2 and rois.shape[1] in (4, -1),
              f"ROIs must be [num_rois, 4] (x1, y1, x2, y2), got {list(rois.shape)}")
    return rois


def _pooled(ctx):
    ph, pw = ctx.attr("pooled_height"), ctx.attr("pooled_width")
    ctx.check(ph > 0 and pw > 0, f"pooled_height and pooled_width must be > 0, got {ph}, {pw}")
    ctx.check(ctx.attr("spatial_scale") > 0,
              f"spatial_scale must be > 0, got {ctx.attr('spatial_scale')}")
    return ph, pw


_ROI_GRAD = dict(no_grad_inputs=("ROIs", "RoisLod"), lod_inputs=("ROIs",))


@define_op("roi_align", inputs=["X", "ROIs", "RoisLod?"], outputs=["Out"],
           grad_uses=("X", "ROIs", "RoisLod"), grad_no_need_buffer=("X",),
           attrs={"pooled_height": ("int", 1), "pooled_width": ("int", 1),
                  "spatial_scale": ("float", 1.0), "sampling_ratio": ("int", -1)}, **_ROI_GRAD)
def _roi_align(ctx):
    x, rois = _check_nchw(ctx, "X"), _check_rois(ctx)
    ph, pw = _pooled(ctx)
    ctx.set_output("Out", (rois.shape[0], x.shape[1], ph, pw), x.dtype)


@define_op("roi_pool", inputs=["X", "ROIs", "RoisLod?"], outputs=["Out", "Argmax"],
           nondiff_outputs=("Argmax",), grad_uses=("X", "ROIs", "RoisLod", "Argmax"),
           grad_no_need_buffer=("X",),
           attrs={"pooled_height": ("int", 1), "pooled_width": ("int", 1),
                  "spatial_scale": ("float", 1.0)}, **_ROI_GRAD)
def _roi_pool(ctx):
    x, rois = _check_nchw(ctx, "X"), _check_rois(ctx)
    ph, pw = _pooled(ctx)
    shape = (rois.shape[0], x.shape[1], ph, pw)
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("Argmax", shape, "int64")


@define_op("psroi_pool", inputs=["X", "ROIs"], outputs=["Out"], grad_uses=("X", "ROIs"),
           grad_no_need_buffer=("X",), no_grad_inputs=("ROIs",), lod_inputs=("ROIs",),
           attrs={"output_channels": "int", "spatial_scale": ("float", 1.0),
                  "pooled_height": ("int", 1), "pooled_width": ("int", 1)})
def _psroi_pool(ctx):
    x, rois = _check_nchw(ctx, "X"), _check_rois(ctx)
    ph, pw = _pooled(ctx)
    oc = ctx.attr("output_channels")
    ctx.check(oc > 0 and (x.shape[1] < 0 or x.shape[1] == oc * ph * pw),
              f"X's channels must be output_channels * pooled_height * pooled_width = "
              f"{oc * ph * pw}, got {x.shape[1]}")
    ctx.set_output("Out", (rois.shape[0], oc, ph, pw), x.dtype)


@define_op("prroi_pool", inputs=["X", "ROIs", "BatchRoINums?"], outputs=["Out"],
           no_grad_inputs=("BatchRoINums",), lod_inputs=("ROIs",),
           attrs={"spatial_scale": ("float", 1.0), "pooled_height": ("int", 1),
                  "pooled_width": ("int", 1)})
def _prroi_pool(ctx):
    x, rois = _check_nchw(ctx, "X"), _check_rois(ctx)
    ph, pw = _pooled(ctx)
    ctx.set_output("Out", (rois.shape[0], x.shape[1], ph, pw), x.dtype)


