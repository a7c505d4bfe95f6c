"""Op definitions: pooling on channel-first inputs: pool2d, pool3d, max_pool2d_with_index and
max_pool3d_with_index (fluid's ops, with their attributes).

`global_pooling` pools each whole feature map and ignores ksize (any value, 0 included, as
fluid); `adaptive` makes ksize the output size, window i of a dim covering
[floor(i*in/out), ceil((i+1)*in/out)). pool2d keeps adaptive=False (adaptive 2-D pooling is
built by fluid.layers.adaptive_pool2d from pool3d / max_pool2d_with_index).
"""
from __future__ import annotations

from .conv import check_layout_and_padding, expand_paddings, pool_out_size, resolve_padding
from .registry import define_op


def pool_geometry(attrs: dict, in_sp):
    """(ksize, strides, pads per dim) of a non-adaptive pool; global pooling covers the whole
    image."""
    nd = len(in_sp)
    if attrs["global_pooling"]:
        return list(in_sp), [1] * nd, [(0, 0)] * nd
    ksize, strides = list(attrs["ksize"]), list(attrs["strides"])
    pads_all = expand_paddings(attrs["paddings"], nd)
    algo = attrs.get("padding_algorithm", "EXPLICIT")  # the with-index ops have none
    pads = [resolve_padding(in_sp[i], ksize[i], strides[i], tuple(pads_all[2 * i:2 * i + 2]),
                            algo) for i in range(nd)]
    return ksize, strides, pads


def _pool_attrs(nd: int, with_index: bool) -> dict:
    attrs = {"ksize": "ints",  # required, as in fluid
             "global_pooling": ("bool", False), "strides": ("ints", [1] * nd),
             "paddings": ("ints", [0] * nd), "adaptive": ("bool", False)}
    if not with_index:
        attrs.update({
            "pooling_type": "str", "exclusive": ("bool", True), "ceil_mode": ("bool", False),
            "padding_algorithm": ("str", "EXPLICIT"), "data_format": ("str", "NCHW"),
            "use_cudnn": ("bool", False), "use_mkldnn": ("bool", False),
            "use_quantizer": ("bool", False), "is_test": ("bool", False)})
    return attrs


def pool_out_shape(attrs: dict, in_sp) -> list[int]:
    """Spatial output size of a pool op with these (validated) attributes."""
    nd = len(in_sp)
    if attrs["global_pooling"]:
        return [1] * nd
    if attrs["adaptive"]:
        return list(attrs["ksize"])
    ksize, strides, pads = pool_geometry(attrs, in_sp)
    return [pool_out_size(in_sp[i], ksize[i], strides[i], pads[i], attrs.get("ceil_mode", False))
            for i in range(nd)]


def _pool_infer(nd: int, with_index: bool, allow_adaptive: bool):
    def infer(ctx):
        x = ctx.input("X")
        if with_index:
            ctx.check(len(x.shape) == nd + 2, f"X must be {nd + 2}-D, got {list(x.shape)}")
            pads = expand_paddings(ctx.attr("paddings"), nd)
            ctx.check(pads is not None and len(pads) == 2 * nd and pads[::2] == pads[1::2],
                      f"paddings must be {nd} non-negative ints, got {ctx.attr('paddings')}")
        else:
            check_layout_and_padding(ctx, x, "X", nd)
            kind = ctx.attr("pooling_type")
            ctx.check(kind in ("max", "avg"), f"pooling_type must be 'max' or 'avg', got {kind!r}")
        ctx.check(allow_adaptive or not ctx.attr("adaptive"),
                  "adaptive=True is not supported by pool2d; use fluid.layers.adaptive_pool2d")
        ksize = ctx.attr("ksize")
        ctx.check(len(ksize) == nd, f"ksize must be {nd} ints, got {ksize}")
        if not ctx.attr("global_pooling"):
            ctx.check(all(k > 0 for k in ksize), f"ksize must be {nd} positive ints, got {ksize}")
        out_sp = pool_out_shape(ctx.attrs, x.shape[2:])
        for i, o in enumerate(out_sp):
            ctx.check(o == -1 or o > 0,
                      f"output spatial dim {i} would be {o}: input {list(x.shape)} is too small "
                      f"for ksize {ksize[i]} with paddings {ctx.attr('paddings')}")
        ctx.set_output("Out", (x.shape[0], x.shape[1], *out_sp), x.dtype)
        ctx.set_output("Mask", (x.shape[0], x.shape[1], *out_sp), "int32")
    return infer


for _type, _nd, _adaptive in (("pool2d", 2, False), ("pool3d", 3, True)):
    define_op(_type, inputs=["X"], outputs=["Out"], grad_uses=("X",),
              attrs=_pool_attrs(_nd, False))(_pool_infer(_nd, False, _adaptive))

for _type, _nd in (("max_pool2d_with_index", 2), ("max_pool3d_with_index", 3)):
    define_op(_type, inputs=["X"], outputs=["Out", "Mask"], nondiff_outputs=("Mask",),
              grad_uses=("X", "Mask"), attrs=_pool_attrs(_nd, True))(
                  _pool_infer(_nd, True, True))
