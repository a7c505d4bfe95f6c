"""Op definitions: im2sequence, image patches as the rows of a LoD sequence per image (its
kernel in spmd/kernels/sequence_patches.py).
"""
from __future__ import annotations

from .registry import define_op


@define_op("im2sequence", inputs=["X", "Y?"], outputs=["Out"],
           attrs={"kernels": "ints", "strides": ("ints", [1, 1]),
                  "paddings": ("ints", [0, 0, 0, 0]), "out_stride": ("ints", [1, 1])},
           no_grad_inputs=("Y",), grad_uses=("X", "Y"), lod_outputs=("Out",))
def _im2sequence(ctx):
    x = ctx.input("X")
    ctx.check(len(x.shape) == 4, f"X '{x.name}' must be 4-D [N, C, H, W], got shape "
                                 f"{list(x.shape)}")
    kernels, strides = ctx.attr("kernels"), ctx.attr("strides")
    paddings, out_stride = ctx.attr("paddings"), ctx.attr("out_stride")
    for name, value, size in (("kernels", kernels, 2), ("strides", strides, 2),
                              ("paddings", paddings, 4), ("out_stride", out_stride, 2)):
        ctx.check(len(value) == size and all(v >= 0 for v in value),
                  f"{name} must be {size} non-negative ints, got {value}")
    ctx.check(min(kernels) > 0 and min(strides) > 0 and min(out_stride) > 0,
              f"kernels, strides and out_stride must be positive, got {kernels}, {strides}, "
              f"{out_stride}")
    n, c, h, w = x.shape
    if h != -1 and w != -1 and not ctx.has_input("Y"):
        oh = (h + paddings[0] + paddings[2] - kernels[0]) // strides[0] + 1
        ow = (w + paddings[1] + paddings[3] - kernels[1]) // strides[1] + 1
        ctx.check(oh > 0 and ow > 0,
                  f"a {kernels} kernel does not fit the {h}x{w} image with paddings "
                  f"{paddings}")
        rows = n * oh * ow if n != -1 else -1
    else:
        rows = -1
    ctx.set_output("Out", (rows, c * kernels[0] * kernels[1] if c != -1 else -1), x.dtype)
    ctx.set_lod_level("Out", 1)
