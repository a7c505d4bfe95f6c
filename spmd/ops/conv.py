"""Op definitions: 2-D and 3-D convolution (conv2d, depthwise_conv2d, conv3d), their transposes
(conv2d_transpose, depthwise_conv2d_transpose, conv3d_transpose), channel-first layouts.

Channel-last inputs (NHWC, NDHWC) are laid out channel-first by the layer builders (transposes
around the op), so the ops and kernels see NC... only. spmd/kernels/conv.py uses the padding
arithmetic below, so the shapes declared here are the shapes the kernels produce; the pooling
ops are in spmd/ops/pool.py.
"""
from __future__ import annotations

from .registry import define_op

PADDING_ALGORITHMS = ("EXPLICIT", "SAME", "VALID")
CHANNEL_FIRST = ("NCHW", "NCDHW", "AnyLayout")  # fluid treats AnyLayout as channel-first


def expand_paddings(paddings, nd: int = 2) -> list[int] | None:
    """fluid's paddings: nd values [ph, pw] mean [ph, ph, pw, pw]; 2*nd values are [before,
    after] per dim. None when the list has another length."""
    p = list(paddings)
    if len(p) == nd:
        return [v for v in p for _ in range(2)]
    if len(p) == 2 * nd:
        return p
    return None


def resolve_padding(size: int, ksize: int, stride: int, pads: tuple[int, int], algorithm: str):
    """(pad_before, pad_after) of one spatial dim after fluid's padding_algorithm.

    SAME pads so that out = ceil(size / stride), the extra pixel going after; VALID pads
    nothing. Returns None for SAME when `size` is unknown (-1)."""
    if algorithm == "VALID":
        return 0, 0
    if algorithm == "SAME":
        if size < 0:
            return None
        out = -(-size // stride)
        total = max((out - 1) * stride + ksize - size, 0)
        return total // 2, total - total // 2
    return pads


def _c_div(a: int, b: int) -> int:
    """a / b truncated toward zero, as C++'s int division (fluid's shape functions)."""
    return a // b if a >= 0 else -(-a // b)


def conv_out_size(size, ksize, stride, pads, dilation) -> int:
    """fluid 1.8's conv output size; like pool_out_size, a kernel reaching past the padded
    input by less than a stride still gives an output (InceptionV4 at small image sizes)."""
    if size < 0 or pads is None:
        return -1
    return _c_div(size + pads[0] + pads[1] - (dilation * (ksize - 1) + 1), stride) + 1


def transpose_out_size(size, ksize, stride, pads, dilation) -> int:
    """Output size of a transposed convolution before `output_size` enlarges it."""
    if size < 0 or pads is None:
        return -1
    return (size - 1) * stride - pads[0] - pads[1] + dilation * (ksize - 1) + 1


def pool_out_size(size, ksize, stride, pads, ceil_mode) -> int:
    """fluid 1.8's pool output size. Its division truncates toward zero (C++), so a window
    larger than the padded input still gives one output when (size + pads - ksize) / stride
    lies in (-1, 0): GoogLeNet's 7x7 average pool on a 1x1 map, at small image sizes."""
    if size < 0 or pads is None:
        return -1
    extra = stride - 1 if ceil_mode else 0
    return _c_div(size - ksize + pads[0] + pads[1] + extra, stride) + 1


def conv_geometry(attrs: dict, in_sp, k_sp):
    """Per spatial dim (pads, dilation) for a conv with these attributes; SAME forces dilation 1
    as fluid does. For a transposed conv `in_sp` is its input's spatial size, as in fluid."""
    nd = len(in_sp)
    pads_all = expand_paddings(attrs["paddings"], nd)
    algo = attrs["padding_algorithm"]
    dil = list(attrs["dilations"]) if algo != "SAME" else [1] * nd
    pads = [resolve_padding(in_sp[i], k_sp[i], attrs["strides"][i],
                            tuple(pads_all[2 * i:2 * i + 2]), algo) for i in range(nd)]
    return pads, dil


def check_layout_and_padding(ctx, x, name: str, nd: int):
    """Checks shared by every conv and pool op: rank, layout, padding and strides."""
    ctx.check(len(x.shape) == nd + 2,
              f"{name} must be {nd + 2}-D channel-first, got shape {list(x.shape)}")
    fmt = ctx.attr("data_format")
    ctx.check(fmt in CHANNEL_FIRST,
              f"data_format must be channel-first ('NCHW'/'NCDHW'), got {fmt!r}; the layers "
              f"take channel-last inputs by transposing them around this op")
    algo = ctx.attr("padding_algorithm")
    ctx.check(algo in PADDING_ALGORITHMS,
              f"padding_algorithm must be one of {list(PADDING_ALGORITHMS)}, got {algo!r}")
    ctx.check(len(ctx.attr("strides")) == nd and all(s > 0 for s in ctx.attr("strides")),
              f"strides must be {nd} positive ints, got {ctx.attr('strides')}")
    pads = expand_paddings(ctx.attr("paddings"), nd)
    ctx.check(pads is not None and all(p >= 0 for p in pads),
              f"paddings must be {nd} or {2 * nd} non-negative ints (one per dim, or [before, "
              f"after] per dim), got {ctx.attr('paddings')}")


def _conv_attrs(nd: int, transpose: bool) -> dict:
    attrs = {
        "strides": ("ints", [1] * nd), "paddings": ("ints", [0] * nd),
        "padding_algorithm": ("str", "EXPLICIT"), "groups": ("int", 1),
        "dilations": ("ints", [1] * nd), "data_format": ("str", "NCHW"),
        # accepted for fluid programs; they only pick a library or tune it
        "use_cudnn": ("bool", False), "use_mkldnn": ("bool", False),
        "workspace_size_MB": ("int", 512), "is_test": ("bool", False),
    }
    if transpose:
        attrs["output_size"] = ("ints", [])
    else:
        attrs.update({"use_quantizer": ("bool", False), "exhaustive_search": ("bool", False),
                      "fuse_relu_before_depthwise_conv": ("bool", False)})
    return attrs


def _check_filter(ctx, x, w, nd: int):
    ctx.check(len(w.shape) == nd + 2, f"Filter must be {nd + 2}-D, got {list(w.shape)}")
    ctx.check(x.dtype == w.dtype, f"Input and Filter dtypes differ: {x.dtype} vs {w.dtype}")
    groups, dil = ctx.attr("groups"), ctx.attr("dilations")
    ctx.check(groups >= 1, f"groups must be >= 1, got {groups}")
    ctx.check(len(dil) == nd and all(d > 0 for d in dil),
              f"dilations must be {nd} positive ints, got {dil}")
    return groups


def _check_out(ctx, x, out_sp, k, pads, dil):
    for i, o in enumerate(out_sp):
        ctx.check(o == -1 or o > 0,
                  f"output spatial dim {i} would be {o}: input {list(x.shape)} is too small "
                  f"for kernel {k[i]} (dilation {dil[i]}) with paddings {pads[i]}")


def _conv_infer(nd: int):
    def infer(ctx):
        x, w = ctx.input("Input"), ctx.input("Filter")
        check_layout_and_padding(ctx, x, "Input", nd)
        groups = _check_filter(ctx, x, w, nd)
        ctx.check(not ctx.attr("fuse_relu_before_depthwise_conv"),
                  "fuse_relu_before_depthwise_conv=True is not supported; apply relu before "
                  "the conv")
        m, cg, k = w.shape[0], w.shape[1], w.shape[2:]
        c = x.shape[1]
        ctx.check(c < 0 or cg < 0 or c == cg * groups,
                  f"Input has {c} channels but Filter{list(w.shape)} with groups={groups} "
                  f"expects {cg} * {groups} = {cg * groups}")
        ctx.check(m < 0 or m % groups == 0,
                  f"Filter's {m} output channels are not divisible by groups={groups}")
        pads, dil = conv_geometry(ctx.attrs, x.shape[2:], k)
        out_sp = [conv_out_size(x.shape[2 + i], k[i], ctx.attr("strides")[i], pads[i], dil[i])
                  for i in range(nd)]
        _check_out(ctx, x, out_sp, k, pads, dil)
        ctx.set_output("Output", (x.shape[0], m, *out_sp), x.dtype)
    return infer


def transpose_output_shape(attrs: dict, in_sp, k) -> list[int]:
    """Spatial output size of a transposed conv: the natural size, or `output_size`, which may
    exceed it by less than the stride (fluid's rule)."""
    pads, dil = conv_geometry(attrs, in_sp, k)
    natural = [transpose_out_size(in_sp[i], k[i], attrs["strides"][i], pads[i], dil[i])
               for i in range(len(in_sp))]
    return list(attrs["output_size"]) or natural


def _transpose_infer(nd: int):
    def infer(ctx):
        x, w = ctx.input("Input"), ctx.input("Filter")
        check_layout_and_padding(ctx, x, "Input", nd)
        groups = _check_filter(ctx, x, w, nd)
        c, mg, k = w.shape[0], w.shape[1], w.shape[2:]
        ctx.check(x.shape[1] < 0 or x.shape[1] == c,
                  f"Input has {x.shape[1]} channels but Filter{list(w.shape)} expects {c} "
                  f"(a transposed conv's filter is [C_in, C_out/groups, ...])")
        ctx.check(c < 0 or c % groups == 0,
                  f"Input's {c} channels are not divisible by groups={groups}")
        pads, dil = conv_geometry(ctx.attrs, x.shape[2:], k)
        strides, osize = ctx.attr("strides"), ctx.attr("output_size")
        ctx.check(not osize or len(osize) == nd,
                  f"output_size must be empty or {nd} ints, got {osize}")
        out_sp = []
        for i in range(nd):
            natural = transpose_out_size(x.shape[2 + i], k[i], strides[i], pads[i], dil[i])
            if osize and natural != -1:
                ctx.check(natural <= osize[i] < natural + strides[i],
                          f"output_size[{i}]={osize[i]} must be in [{natural}, "
                          f"{natural + strides[i]}) for input {list(x.shape)}, filter "
                          f"{list(w.shape)}, stride {strides[i]}")
            out_sp.append(osize[i] if osize else natural)
        _check_out(ctx, x, out_sp, k, pads, dil)
        ctx.set_output("Output", (x.shape[0], mg * groups, *out_sp), x.dtype)
    return infer


for _type, _nd in (("conv2d", 2), ("depthwise_conv2d", 2), ("conv3d", 3)):
    define_op(_type, inputs=["Input", "Filter"], outputs=["Output"],
              attrs=_conv_attrs(_nd, False), grad_uses=("Input", "Filter"))(_conv_infer(_nd))

for _type, _nd in (("conv2d_transpose", 2), ("depthwise_conv2d_transpose", 2),
                   ("conv3d_transpose", 3)):
    define_op(_type, inputs=["Input", "Filter"], outputs=["Output"],
              attrs=_conv_attrs(_nd, True), grad_uses=("Input", "Filter"))(_transpose_infer(_nd))
