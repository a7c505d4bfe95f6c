"""Op definitions: 2-D convolution (conv2d, depthwise_conv2d) and pooling (pool2d), NCHW.

spmd/kernels/conv.py restates the padding arithmetic below (kernels may not import ops);
tests/unit/test_ops_nn.py checks that the shapes declared here are the shapes the kernels produce.
"""
from __future__ import annotations

from .registry import define_op

PADDING_ALGORITHMS = ("EXPLICIT", "SAME", "VALID")
NCHW_FORMATS = ("NCHW", "AnyLayout")  # fluid treats AnyLayout as NCHW for these ops


def expand_paddings(paddings) -> list[int] | None:
    """fluid's paddings: [ph, pw] means [ph, ph, pw, pw]; 4 values are [top, bottom, left,
    right]. None when the list has another length."""
    p = list(paddings)
    if len(p) == 2:
        return [p[0], p[0], p[1], p[1]]
    if len(p) == 4:
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


def conv_out_size(size, ksize, stride, pads, dilation) -> int:
    if size < 0 or pads is None:
        return -1
    return (size + pads[0] + pads[1] - (dilation * (ksize - 1) + 1)) // stride + 1


def pool_out_size(size, ksize, stride, pads, ceil_mode) -> int:
    if size < 0 or pads is None:
        return -1
    extra = stride - 1 if ceil_mode else 0
    return (size - ksize + pads[0] + pads[1] + extra) // stride + 1


def conv_geometry(attrs: dict, in_hw, k_hw):
    """Per spatial dim (pads, dilation) for a conv with these attributes; SAME forces dilation 1
    as fluid does."""
    pads4 = expand_paddings(attrs["paddings"])
    algo = attrs["padding_algorithm"]
    dil = list(attrs["dilations"]) if algo != "SAME" else [1, 1]
    pads = [resolve_padding(in_hw[i], k_hw[i], attrs["strides"][i], tuple(pads4[2 * i:2 * i + 2]),
                            algo) for i in range(2)]
    return pads, dil


def pool_geometry(attrs: dict, in_hw):
    """(ksize, strides, pads per dim) of a pool2d; global pooling covers the whole image."""
    if attrs["global_pooling"]:
        return list(in_hw), [1, 1], [(0, 0), (0, 0)]
    ksize, strides = list(attrs["ksize"]), list(attrs["strides"])
    pads4 = expand_paddings(attrs["paddings"])
    algo = attrs["padding_algorithm"]
    pads = [resolve_padding(in_hw[i], ksize[i], strides[i], tuple(pads4[2 * i:2 * i + 2]), algo)
            for i in range(2)]
    return ksize, strides, pads


def _check_common(ctx, x, name: str):
    ctx.check(len(x.shape) == 4, f"{name} must be 4-D NCHW, got shape {list(x.shape)}")
    fmt = ctx.attr("data_format")
    ctx.check(fmt in NCHW_FORMATS,
              f"data_format must be 'NCHW' (the only layout implemented), got {fmt!r}; "
              f"transpose the input to NCHW")
    algo = ctx.attr("padding_algorithm")
    ctx.check(algo in PADDING_ALGORITHMS,
              f"padding_algorithm must be one of {list(PADDING_ALGORITHMS)}, got {algo!r}")
    ctx.check(len(ctx.attr("strides")) == 2 and all(s > 0 for s in ctx.attr("strides")),
              f"strides must be 2 positive ints, got {ctx.attr('strides')}")
    pads = expand_paddings(ctx.attr("paddings"))
    ctx.check(pads is not None and all(p >= 0 for p in pads),
              f"paddings must be 2 or 4 non-negative ints ([ph, pw] or [top, bottom, left, "
              f"right]), got {ctx.attr('paddings')}")


CONV_ATTRS = {
    "strides": ("ints", [1, 1]), "paddings": ("ints", [0, 0]),
    "padding_algorithm": ("str", "EXPLICIT"), "groups": ("int", 1),
    "dilations": ("ints", [1, 1]), "data_format": ("str", "NCHW"),
    # accepted for fluid programs; they only pick a library or tune it
    "use_cudnn": ("bool", False), "use_mkldnn": ("bool", False), "use_quantizer": ("bool", False),
    "workspace_size_MB": ("int", 512), "exhaustive_search": ("bool", False),
    "is_test": ("bool", False), "fuse_relu_before_depthwise_conv": ("bool", False),
}


def _conv_infer(ctx):
    x, w = ctx.input("Input"), ctx.input("Filter")
    _check_common(ctx, x, "Input")
    ctx.check(len(w.shape) == 4, f"Filter must be 4-D [M, C/groups, kh, kw], got {list(w.shape)}")
    ctx.check(x.dtype == w.dtype, f"Input and Filter dtypes differ: {x.dtype} vs {w.dtype}")
    ctx.check(not ctx.attr("fuse_relu_before_depthwise_conv"),
              "fuse_relu_before_depthwise_conv=True is not supported; apply relu before the conv")
    groups, dil = ctx.attr("groups"), ctx.attr("dilations")
    ctx.check(groups >= 1, f"groups must be >= 1, got {groups}")
    ctx.check(len(dil) == 2 and all(d > 0 for d in dil),
              f"dilations must be 2 positive ints, got {dil}")
    m, cg, kh, kw = w.shape
    c = x.shape[1]
    ctx.check(c < 0 or cg < 0 or c == cg * groups,
              f"Input has {c} channels but Filter{list(w.shape)} with groups={groups} expects "
              f"{cg} * {groups} = {cg * groups}")
    ctx.check(m < 0 or m % groups == 0,
              f"Filter's {m} output channels are not divisible by groups={groups}")
    pads, dil = conv_geometry(ctx.attrs, x.shape[2:], (kh, kw))
    out_hw = [conv_out_size(x.shape[2 + i], (kh, kw)[i], ctx.attr("strides")[i], pads[i], dil[i])
              for i in range(2)]
    for i, o in enumerate(out_hw):
        ctx.check(o == -1 or o > 0,
                  f"output {'HW'[i]} would be {o}: input {list(x.shape)} is too small for kernel "
                  f"{(kh, kw)[i]} (dilation {dil[i]}) with paddings {pads[i]}")
    ctx.set_output("Output", (x.shape[0], m, *out_hw), x.dtype)


for _type in ("conv2d", "depthwise_conv2d"):
    define_op(_type, inputs=["Input", "Filter"], outputs=["Output"], attrs=CONV_ATTRS,
              grad_uses=("Input", "Filter"))(_conv_infer)


@define_op("pool2d", inputs=["X"], outputs=["Out"], grad_uses=("X",),
           attrs={"pooling_type": "str", "ksize": "ints",  # required, as in fluid
                  "global_pooling": ("bool", False), "strides": ("ints", [1, 1]),
                  "paddings": ("ints", [0, 0]), "exclusive": ("bool", True),
                  "adaptive": ("bool", False), "ceil_mode": ("bool", False),
                  "padding_algorithm": ("str", "EXPLICIT"), "data_format": ("str", "NCHW"),
                  "use_cudnn": ("bool", False), "use_mkldnn": ("bool", False),
                  "use_quantizer": ("bool", False), "is_test": ("bool", False)})
def _pool2d(ctx):
    x = ctx.input("X")
    _check_common(ctx, x, "X")
    kind = ctx.attr("pooling_type")
    ctx.check(kind in ("max", "avg"), f"pooling_type must be 'max' or 'avg', got {kind!r}")
    ctx.check(not ctx.attr("adaptive"),
              "adaptive=True (adaptive pooling) is not supported; use global_pooling or an "
              "explicit ksize")
    ksize = ctx.attr("ksize")
    ctx.check(len(ksize) == 2 and all(k > 0 for k in ksize),
              f"ksize must be 2 positive ints, got {ksize}")
    if ctx.attr("global_pooling"):
        ctx.set_output("Out", (x.shape[0], x.shape[1], 1, 1), x.dtype)
        return
    ksize, strides, pads = pool_geometry(ctx.attrs, x.shape[2:])
    out_hw = [pool_out_size(x.shape[2 + i], ksize[i], strides[i], pads[i], ctx.attr("ceil_mode"))
              for i in range(2)]
    for i, o in enumerate(out_hw):
        ctx.check(o == -1 or o > 0,
                  f"output {'HW'[i]} would be {o}: input {list(x.shape)} is too small for ksize "
                  f"{ksize[i]} with paddings {pads[i]}")
    ctx.set_output("Out", (x.shape[0], x.shape[1], *out_hw), x.dtype)
