"""fluid.layers vision builders: image_resize / interpolate and the resize_* shortcuts,
image_resize_short, pixel_shuffle, space_to_depth, shuffle_channel, temporal_shift, unfold; the
others (maxout, affine_channel, fsp_matrix, affine_grid, ...) are in vision_ops.py.

>>> # y = resize_bilinear(x [N, 3, 8, 8], out_shape=[16, 16])   # -> [N, 3, 16, 16]
"""
from __future__ import annotations

import numbers

from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .tensor import fill_constant
from .vision_ops import (
    add_position_encoding,
    affine_channel,
    affine_grid,
    bilinear_tensor_product,
    fsp_matrix,
    grid_sampler,
    maxout,
)

__all__ = ["add_position_encoding", "affine_channel", "affine_grid", "bilinear_tensor_product",
           "fsp_matrix", "grid_sampler", "image_resize", "image_resize_short", "interpolate",
           "maxout", "pixel_shuffle", "resize_bilinear", "resize_nearest", "resize_trilinear",
           "shuffle_channel", "space_to_depth", "temporal_shift", "unfold"]

_FLOATS = {"float16", "float32", "float64"}
_METHODS = {"BILINEAR": "bilinear", "TRILINEAR": "trilinear", "NEAREST": "nearest"}


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _out_shape_inputs(helper, out_shape, nd: int, inputs: dict, attrs: dict, where: str):
    """out_shape as fluid takes it: a Variable (OutSize), or nd entries, ints or [1] int32
    Variables (then every entry becomes a SizeTensor)."""
    if isinstance(out_shape, Variable):
        out_shape.stop_gradient = True
        inputs["OutSize"] = [out_shape]
        return
    if not isinstance(out_shape, (list, tuple)) or len(out_shape) != nd:
        raise InvalidArgumentError(
            f"{where}: out_shape must be a Variable or {nd} sizes for a {nd + 2}-D input, got "
            f"{out_shape!r}")
    names = ("out_d", "out_h", "out_w")[3 - nd:]
    if any(isinstance(d, Variable) for d in out_shape):
        tensors = []
        for name, d in zip(names, out_shape):
            if isinstance(d, Variable):
                d.stop_gradient = True
                tensors.append(d)
                attrs[name] = -1
            else:
                tensors.append(fill_constant([1], "int32", int(d), force_cpu=True))
                attrs[name] = int(d)
        inputs["SizeTensor"] = tensors
        return
    if not all(_is_int(d) and d > 0 for d in out_shape):
        raise InvalidArgumentError(f"{where}: every out_shape size must be a positive int, "
                                   f"got {out_shape!r}")
    attrs.update({n: int(d) for n, d in zip(names, out_shape)})


def image_resize(input, out_shape=None, scale=None, name=None, resample="BILINEAR",
                 actual_shape=None, align_corners=True, align_mode=1, data_format="NCHW"):
    """Resize a 4-D (BILINEAR, NEAREST) or 5-D (TRILINEAR) input to out_shape, or by scale
    (out_shape wins when both are given; actual_shape, a Variable, wins at run time over all
    but an out_shape holding Variables, as in fluid).
    align_corners / align_mode pick fluid's source-pixel rule.

    >>> # image_resize(x [N, 3, 6, 6], out_shape=[12, 9]) -> [N, 3, 12, 9]
    """
    where = "image_resize"
    check_variable(input, "input", where, dtypes=_FLOATS)
    if resample not in _METHODS:
        raise InvalidArgumentError(f"{where}: resample must be one of {sorted(_METHODS)}, got "
                                   f"{resample!r}")
    nd = 3 if resample == "TRILINEAR" else 2
    if input.ndim != nd + 2:
        raise InvalidArgumentError(f"{where}: resample={resample} needs a {nd + 2}-D input, got "
                                   f"{input.name} {list(input.shape)}")
    formats = ("NCHW", "NHWC") if nd == 2 else ("NCDHW", "NDHWC")
    if data_format not in formats:
        raise InvalidArgumentError(f"{where}: data_format must be one of {list(formats)}, got "
                                   f"{data_format!r}")
    if not isinstance(align_corners, bool):
        raise InvalidArgumentError(f"{where}: align_corners must be a bool")
    if align_mode not in (0, 1):
        raise InvalidArgumentError(f"{where}: align_mode must be 0 or 1, got {align_mode!r}")
    if out_shape is None and scale is None:
        raise InvalidArgumentError(f"{where}: give out_shape or scale")
    method = _METHODS[resample]
    helper = LayerHelper(f"{method}_interp", name=name)
    inputs = {"X": [input]}
    attrs = {"out_d": -1, "out_h": -1, "out_w": -1, "interp_method": method,
             "align_corners": align_corners, "align_mode": align_mode,
             "data_layout": "NHWC" if data_format.endswith("C") else "NCHW"}
    if out_shape is not None:
        _out_shape_inputs(helper, out_shape, nd, inputs, attrs, where)
    elif isinstance(scale, Variable):
        scale.stop_gradient = True
        inputs["Scale"] = [scale]
    elif isinstance(scale, numbers.Real) and not isinstance(scale, bool) and scale > 0:
        attrs["scale"] = float(scale)
    else:
        raise InvalidArgumentError(f"{where}: scale must be a positive number or a Variable, "
                                   f"got {scale!r}")
    if actual_shape is not None:
        if not isinstance(actual_shape, Variable):
            raise InvalidArgumentError(f"{where}: actual_shape must be a Variable or None")
        actual_shape.stop_gradient = True
        inputs["OutSize"] = [actual_shape]  # a SizeTensor, when there is one, still wins
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(f"{method}_interp", inputs, {"Out": [out]}, attrs)
    return out


def interpolate(input, out_shape=None, scale=None, name=None, resample="BILINEAR",
                actual_shape=None, align_corners=True, align_mode=1, data_format="NCHW"):
    """fluid 1.8's other name for image_resize (same arguments, same op).

    >>> # interpolate(x [N, 3, 6, 6], scale=2.0) -> [N, 3, 12, 12]
    """
    return image_resize(input, out_shape, scale, name, resample, actual_shape, align_corners,
                        align_mode, data_format)


def resize_bilinear(input, out_shape=None, scale=None, name=None, actual_shape=None,
                    align_corners=True, align_mode=1, data_format="NCHW"):
    """image_resize with resample="BILINEAR".

    >>> # resize_bilinear(x [N, 3, 4, 4], out_shape=[8, 8]) -> [N, 3, 8, 8]
    """
    return image_resize(input, out_shape, scale, name, "BILINEAR", actual_shape, align_corners,
                        align_mode, data_format)


def resize_trilinear(input, out_shape=None, scale=None, name=None, actual_shape=None,
                     align_corners=True, align_mode=1, data_format="NCDHW"):
    """image_resize with resample="TRILINEAR" on a 5-D input.

    >>> # resize_trilinear(x [N, 3, 4, 4, 4], scale=2) -> [N, 3, 8, 8, 8]
    """
    return image_resize(input, out_shape, scale, name, "TRILINEAR", actual_shape, align_corners,
                        align_mode, data_format)


def resize_nearest(input, out_shape=None, scale=None, name=None, actual_shape=None,
                   align_corners=True, data_format="NCHW"):
    """image_resize with resample="NEAREST".

    >>> # resize_nearest(x [N, 3, 4, 4], scale=2) -> [N, 3, 8, 8]
    """
    return image_resize(input, out_shape, scale, name, "NEAREST", actual_shape, align_corners,
                        1, data_format)


def image_resize_short(input, out_short_len, resample="BILINEAR"):
    """Resize so that the shorter of H, W becomes out_short_len, keeping the aspect ratio
    (the long side rounded to nearest).

    >>> # image_resize_short(x [N, 3, 4, 6], out_short_len=8) -> [N, 3, 8, 12]
    """
    check_variable(input, "input", "image_resize_short", dtypes=_FLOATS)
    if input.ndim != 4 or min(input.shape[2:]) <= 0:
        raise InvalidArgumentError(
            f"image_resize_short: input must be 4-D with known H and W, got "
            f"{list(input.shape)}")
    hw = list(input.shape[2:4])
    short = hw.index(min(hw))
    out = list(hw)
    out[short] = out_short_len
    out[1 - short] = int(float(hw[1 - short]) * (float(out_short_len) / float(hw[short])) + 0.5)
    return image_resize(input, out_shape=out, resample=resample)


def _simple(op_type, x, attrs, where, out_slot="Out", name=None):
    check_variable(x, "x", where, dtypes=_FLOATS)
    if x.ndim != 4:
        raise InvalidArgumentError(f"{where}: x must be 4-D NCHW, got {list(x.shape)}")
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": [x]}, {out_slot: [out]}, attrs)
    return out


def _positive_int(v, arg, where):
    if not _is_int(v) or v <= 0:
        raise InvalidArgumentError(f"{where}: {arg} must be a positive int, got {v!r}")
    return int(v)


def pixel_shuffle(x, upscale_factor):
    """[N, C*r*r, H, W] -> [N, C, H*r, W*r]: channel blocks become r x r pixel blocks.

    >>> # pixel_shuffle(x [N, 9, 4, 4], upscale_factor=3) -> [N, 1, 12, 12]
    """
    r = _positive_int(upscale_factor, "upscale_factor", "pixel_shuffle")
    return _simple("pixel_shuffle", x, {"upscale_factor": r}, "pixel_shuffle")


def space_to_depth(x, blocksize, name=None):
    """[N, C, H, W] -> [N, C*b*b, H/b, W/b] in fluid's (darknet reorg) element order; C must
    be divisible by b*b.

    >>> # space_to_depth(x [N, 4, 4, 4], blocksize=2) -> [N, 16, 2, 2]
    """
    b = _positive_int(blocksize, "blocksize", "space_to_depth")
    return _simple("space_to_depth", x, {"blocksize": b}, "space_to_depth", name=name)


def shuffle_channel(x, group, name=None):
    """Channel shuffle (ShuffleNet): channels viewed as [group, C/group] are transposed.

    >>> # shuffle_channel(x [N, 6, 4, 4], group=2)   # channel order 0 3 1 4 2 5
    """
    g = _positive_int(group, "group", "shuffle_channel")
    return _simple("shuffle_channel", x, {"group": g}, "shuffle_channel", name=name)


def temporal_shift(x, seg_num, shift_ratio=0.25, name=None):
    """TSM shift on [N*T, C, H, W] (T = seg_num): the first C*ratio channels take the previous
    frame's values, the next C*ratio the next frame's, zeros at the segment ends.

    >>> # temporal_shift(x [2*8, 16, 7, 7], seg_num=8, shift_ratio=0.25)
    """
    t = _positive_int(seg_num, "seg_num", "temporal_shift")
    if not isinstance(shift_ratio, float):
        raise InvalidArgumentError(f"temporal_shift: shift_ratio must be a float, got "
                                   f"{shift_ratio!r}")
    return _simple("temporal_shift", x, {"seg_num": t, "shift_ratio": shift_ratio},
                   "temporal_shift", name=name)


def _list(v, n, arg, where, minimum):
    values = list(v) if isinstance(v, (list, tuple)) else [v] * n
    if len(values) != n or not all(_is_int(a) and a >= minimum for a in values):
        raise InvalidArgumentError(f"unfold: {arg} must be an int or {n} ints >= {minimum}, "
                                   f"got {v!r}")
    return [int(a) for a in values]


def unfold(x, kernel_sizes, strides=1, paddings=0, dilations=1, name=None):
    """im2col: [N, C, H, W] -> [N, C*kh*kw, L], one column per sliding block. paddings: an
    int, [ph, pw], or [top, left, bottom, right].

    >>> # unfold(x [N, 3, 8, 8], kernel_sizes=2, strides=2) -> [N, 12, 16]
    """
    where = "unfold"
    pads = paddings
    if isinstance(pads, (list, tuple)) and len(pads) == 2:
        pads = [pads[0], pads[1], pads[0], pads[1]]
    attrs = {"kernel_sizes": _list(kernel_sizes, 2, "kernel_sizes", where, 1),
             "strides": _list(strides, 2, "strides", where, 1),
             "paddings": _list(pads, 4, "paddings", where, 0),
             "dilations": _list(dilations, 2, "dilations", where, 1)}
    return _simple("unfold", x, attrs, where, out_slot="Y", name=name)
