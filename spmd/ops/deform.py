"""Op definitions: deformable_conv (modulated, DCN v2) and deformable_conv_v1 (DCN v1).

Each kernel tap (i, j) of output pixel (y, x) reads the input bilinearly at
(y*stride - pad + i*dilation + dh, x*stride - pad + j*dilation + dw), (dh, dw) taken from
Offset [N, 2*dg*kh*kw, OH, OW] (pairs (dh, dw) per deformable group and tap), zero outside
the image; v2 multiplies each read by Mask [N, dg*kh*kw, OH, OW].
"""
from __future__ import annotations

from .conv import conv_out_size
from .registry import define_op

_ATTRS = {"strides": ("ints", [1, 1]), "paddings": ("ints", [0, 0]),
          "dilations": ("ints", [1, 1]), "groups": ("int", 1),
          "deformable_groups": ("int", 1), "im2col_step": ("int", 64)}


def _infer(modulated: bool):
    def infer(ctx):
        x, w, off = ctx.input("Input"), ctx.input("Filter"), ctx.input("Offset")
        ctx.check(len(x.shape) == 4 and len(w.shape) == 4,
                  f"Input and Filter must be 4-D, got {list(x.shape)} and {list(w.shape)}")
        g, dg = ctx.attr("groups"), ctx.attr("deformable_groups")
        s, p, d = ctx.attr("strides"), ctx.attr("paddings"), ctx.attr("dilations")
        ctx.check(len(s) == 2 and len(p) == 2 and len(d) == 2,
                  f"strides, paddings and dilations need 2 ints, got {s}, {p}, {d}")
        c = x.shape[1]
        ctx.check(g >= 1 and dg >= 1 and (c < 0 or (c % g == 0 and c % dg == 0)),
                  f"groups={g} and deformable_groups={dg} must divide the {c} input channels")
        ctx.check(c < 0 or w.shape[1] * g == c,
                  f"Filter{list(w.shape)} with groups={g} does not fit {c} input channels")
        k = w.shape[2] * w.shape[3]
        out = [conv_out_size(x.shape[2 + i], w.shape[2 + i], s[i], (p[i], p[i]), d[i])
               for i in range(2)]
        ctx.check(tuple(off.shape[1:]) == (2 * dg * k, *out),
                  f"Offset must be [N, {2 * dg * k}, {out[0]}, {out[1]}], got {list(off.shape)}")
        if modulated:
            m = ctx.input("Mask")
            ctx.check(tuple(m.shape[1:]) == (dg * k, *out),
                      f"Mask must be [N, {dg * k}, {out[0]}, {out[1]}], got {list(m.shape)}")
        ctx.set_output("Output", (x.shape[0], w.shape[0], *out), x.dtype)
    return infer


define_op("deformable_conv", inputs=["Input", "Offset", "Mask", "Filter"], outputs=["Output"],
          attrs=dict(_ATTRS))(_infer(True))
define_op("deformable_conv_v1", inputs=["Input", "Offset", "Filter"], outputs=["Output"],
          attrs=dict(_ATTRS))(_infer(False))
