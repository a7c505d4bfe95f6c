"""Op definitions: vision ops that move or blend pixels: bilinear/nearest/trilinear_interp,
pixel_shuffle, space_to_depth, shuffle_channel, temporal_shift, unfold.

Each is linear in X, so spmd/kernels/vision.py computes it as a weighted gather and its
gradient as the matching scatter-add.
"""
from __future__ import annotations

from .registry import define_op

INTERP_ATTRS = {"out_d": ("int", -1), "out_h": ("int", -1), "out_w": ("int", -1),
                "scale": ("float", 0.0), "interp_method": ("str", "bilinear"),
                "align_corners": ("bool", True), "align_mode": ("int", 1),
                "data_layout": ("str", "NCHW")}


def interp_out_size(attrs: dict, in_sp) -> list[int]:
    """Output spatial size from the attributes: scale (> 0) wins, as fluid's shape inference."""
    names = ("out_d", "out_h", "out_w")[3 - len(in_sp):]
    if attrs["scale"] > 0:
        return [int(s * attrs["scale"]) if s > 0 else -1 for s in in_sp]
    return [attrs[n] for n in names]


def _interp_infer(nd: int):
    def infer(ctx):
        x = ctx.input("X")
        ctx.check(len(x.shape) == nd + 2, f"X must be {nd + 2}-D, got {list(x.shape)}")
        layout = ctx.attr("data_layout")
        ctx.check(layout in ("NCHW", "NHWC", "AnyLayout"),
                  f"data_layout must be 'NCHW' or 'NHWC', got {layout!r}")
        ctx.check(ctx.attr("align_mode") in (0, 1),
                  f"align_mode must be 0 or 1, got {ctx.attr('align_mode')}")
        last = layout == "NHWC"
        in_sp = x.shape[1:-1] if last else x.shape[2:]
        out = interp_out_size(ctx.attrs, in_sp)
        if ctx.has_input("Scale"):
            out = [-1] * nd  # known when the program runs
        elif ctx.has_input("OutSize") or ctx.has_input("SizeTensor"):
            # sizes that come at run time; those also given as ints (an attribute > 0: an
            # out_shape list beside actual_shape, or an int entry among Variables) are what
            # the layers after this one see, as in fluid 1.8
            names = ("out_d", "out_h", "out_w")[3 - nd:]
            out = [ctx.attr(n) if ctx.attr(n) > 0 else -1 for n in names]
        else:
            ctx.check(all(o > 0 for o in out) or any(s < 0 for s in in_sp),
                      f"give a positive output size or scale, got out {out}, scale "
                      f"{ctx.attr('scale')}")
        c = x.shape[-1] if last else x.shape[1]
        shape = (x.shape[0], *out, c) if last else (x.shape[0], c, *out)
        ctx.set_output("Out", shape, x.dtype)
    return infer


for _type, _nd in (("bilinear_interp", 2), ("nearest_interp", 2), ("trilinear_interp", 3)):
    define_op(_type, inputs=["X", "OutSize?", "SizeTensor*", "Scale?"], outputs=["Out"],
              no_grad_inputs=("OutSize", "SizeTensor", "Scale"), attrs=dict(INTERP_ATTRS),
              grad_uses=("X", "OutSize", "SizeTensor", "Scale"))(_interp_infer(_nd))


def _four_d(ctx, x):
    ctx.check(len(x.shape) == 4, f"X must be 4-D NCHW, got {list(x.shape)}")


@define_op("pixel_shuffle", inputs=["X"], outputs=["Out"], grad_uses=("X",),
           attrs={"upscale_factor": ("int", 1), "data_format": ("str", "NCHW")})
def _pixel_shuffle(ctx):
    x, r = ctx.input("X"), ctx.attr("upscale_factor")
    _four_d(ctx, x)
    ctx.check(r >= 1, f"upscale_factor must be >= 1, got {r}")
    n, c, h, w = x.shape
    ctx.check(c < 0 or c % (r * r) == 0,
              f"X's {c} channels must be divisible by upscale_factor**2 = {r * r}")
    ctx.set_output("Out", (n, c // (r * r) if c > 0 else -1, h * r if h > 0 else -1,
                           w * r if w > 0 else -1), x.dtype)


@define_op("space_to_depth", inputs=["X"], outputs=["Out"], grad_uses=("X",),
           attrs={"blocksize": "int"})
def _space_to_depth(ctx):
    x, b = ctx.input("X"), ctx.attr("blocksize")
    _four_d(ctx, x)
    n, c, h, w = x.shape
    ctx.check(b >= 1, f"blocksize must be >= 1, got {b}")
    ctx.check(c < 0 or c % (b * b) == 0, f"X's {c} channels must be divisible by blocksize**2")
    ctx.check((h < 0 or h % b == 0) and (w < 0 or w % b == 0),
              f"X's height and width {h}, {w} must be divisible by blocksize={b}")
    ctx.set_output("Out", (n, c * b * b if c > 0 else -1, h // b if h > 0 else -1,
                           w // b if w > 0 else -1), x.dtype)


@define_op("shuffle_channel", inputs=["X"], outputs=["Out"], grad_uses=("X",),
           attrs={"group": ("int", 1)})
def _shuffle_channel(ctx):
    x, g = ctx.input("X"), ctx.attr("group")
    _four_d(ctx, x)
    ctx.check(g >= 1 and (x.shape[1] < 0 or x.shape[1] % g == 0),
              f"group={g} must be a positive divisor of X's {x.shape[1]} channels")
    ctx.set_output("Out", x.shape, x.dtype)


@define_op("temporal_shift", inputs=["X"], outputs=["Out"], grad_uses=("X",),
           attrs={"seg_num": "int", "shift_ratio": ("float", 0.25)})
def _temporal_shift(ctx):
    x, t = ctx.input("X"), ctx.attr("seg_num")
    _four_d(ctx, x)
    ctx.check(t >= 1 and (x.shape[0] < 0 or x.shape[0] % t == 0),
              f"seg_num={t} must be a positive divisor of X's batch dim {x.shape[0]}")
    ratio = ctx.attr("shift_ratio")
    ctx.check(0.0 < ratio < 0.5, f"shift_ratio must be in (0, 0.5), got {ratio}")
    ctx.set_output("Out", x.shape, x.dtype)


@define_op("unfold", inputs=["X"], outputs=["Y"], grad_uses=("X",),
           attrs={"kernel_sizes": "ints", "strides": "ints", "paddings": "ints",
                  "dilations": "ints"})
def _unfold(ctx):
    x = ctx.input("X")
    _four_d(ctx, x)
    k, s, p, d = (ctx.attr(a) for a in ("kernel_sizes", "strides", "paddings", "dilations"))
    ctx.check(len(k) == 2 and len(s) == 2 and len(d) == 2 and len(p) == 4,
              f"kernel_sizes, strides, dilations need 2 ints and paddings 4, got {k}, {s}, "
              f"{d}, {p}")
    n, c, h, w = x.shape
    out = [(size + p[i] + p[i + 2] - (d[i] * (k[i] - 1) + 1)) // s[i] + 1 if size > 0 else -1
           for i, size in enumerate((h, w))]
    ctx.check(all(o == -1 or o > 0 for o in out),
              f"unfold: input {list(x.shape)} is too small for kernel {k} (dilations {d}, "
              f"paddings {p}): {out} blocks")
    length = out[0] * out[1] if min(out) > 0 else -1
    ctx.set_output("Y", (n, c * k[0] * k[1] if c > 0 else -1, length), x.dtype)
