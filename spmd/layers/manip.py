"""fluid.layers: cropping, padding, tiling, flipping, stacking, strided slicing and shape
queries (the nn.py part of fluid 1.8's tensor manipulation), and the CTR show/click features
(continuous_value_model).

>>> # y = expand(x, expand_times=[1, 3])   # x [N, 2] -> y [N, 6]
"""
from __future__ import annotations

from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .tensor import _int_list, assign, int_tensor_inputs, reshape

__all__ = [
    "continuous_value_model", "crop", "crop_tensor", "diag_embed", "expand", "expand_as", "flip",
    "meshgrid", "pad", "pad2d", "pad_constant_like", "rank", "roll", "shape", "size", "stack",
    "strided_slice", "unstack",
]


def _simple(layer, op, inputs, attrs=None, dtype=None, name=None):
    helper = LayerHelper(layer, name=name)
    first = next(iter(inputs.values()))[0]
    out = helper.create_variable_for_type_inference(dtype or first.dtype)
    helper.append_op(op, inputs, {"Out": [out]}, attrs or {})
    return out


def crop(x, shape=None, offsets=None, name=None):
    """x cut to `shape` (a list, or a Variable whose shape is used) starting at `offsets`
    (a list or a 1-D int Variable; zeros by default). As in fluid 1.8, -1 may stand only in
    shape[0] and means x's batch size (crop_tensor's -1 keeps the rest of any dim).

    >>> # crop(x [3, 5], shape=[2, 2], offsets=[0, 1])
    """
    check_variable(x, "x", "crop")
    inputs, attrs = {"X": [x]}, {}
    if isinstance(shape, Variable):
        inputs["Y"] = [shape]
    elif shape is None:
        raise InvalidArgumentError("crop: give shape (a list of ints or a Variable)")
    else:
        attrs["shape"] = _int_list(shape, "shape", "crop")
    if offsets is None:
        offsets = [0] * x.ndim
    if isinstance(offsets, Variable):
        inputs["Offsets"] = [offsets]
    else:
        attrs["offsets"] = _int_list(offsets, "offsets", "crop")
    return _simple("crop", "crop", inputs, attrs, name=name)


def _crop_list(helper, values, what, inputs, slot, placeholder):
    # fluid 1.8's crop_tensor checks only that an entry is an int or a Variable at build time
    attr, tensors = int_tensor_inputs(helper, list(values), what, check_dtype=False)
    if tensors is not None:
        inputs[slot] = tensors
        attr = [placeholder if isinstance(v, Variable) else a for v, a in zip(values, attr)]
    return attr


def crop_tensor(x, shape=None, offsets=None, name=None):
    """x cut to `shape` from `offsets`; both may be lists (holding Variables too) or 1-D int
    Variables; -1 in shape keeps the rest of x's dim after the offset.

    >>> # crop_tensor(x [3, 5], shape=[-1, 2], offsets=[1, 1])  -> [2, 2]
    """
    helper = LayerHelper("crop_tensor", name=name)
    check_variable(x, "x", "crop_tensor")
    inputs, attrs = {"X": [x]}, {}
    offsets = [0] * x.ndim if offsets is None else offsets
    if isinstance(offsets, Variable):
        inputs["Offsets"] = [offsets]
        attrs["offsets"] = [-1] * x.ndim
    else:
        attrs["offsets"] = _crop_list(helper, offsets, "offsets", inputs, "OffsetsTensor", -1)
        if any(o < 0 for o, v in zip(attrs["offsets"], offsets) if not isinstance(v, Variable)):
            raise InvalidArgumentError(f"crop_tensor: offsets must be >= 0, got {offsets}")
    if isinstance(shape, Variable):
        inputs["Shape"] = [shape]
    elif shape is None:
        raise InvalidArgumentError("crop_tensor: give shape (a list or a 1-D int Variable)")
    else:
        attrs["shape"] = _crop_list(helper, shape, "shape", inputs, "ShapeTensor", 0)
        bad = [s for s, v in zip(attrs["shape"], shape)
               if not isinstance(v, Variable) and (s == 0 or s < -1)]
        if bad:
            raise InvalidArgumentError(
                f"crop_tensor: shape entries must be > 0 or -1 (rest of the dim), got {shape}")
    return _simple("crop_tensor", "crop_tensor", inputs, attrs, name=name)


def expand(x, expand_times, name=None):
    """x tiled `expand_times[i]` times along each dim i (a list that may hold Variables, or
    a 1-D int Variable).

    >>> # expand(x [2, 3], [2, 1])  -> [4, 3]
    """
    helper = LayerHelper("expand", name=name)
    check_variable(x, "x", "expand")
    inputs, attrs = {"X": [x]}, {}
    if isinstance(expand_times, Variable):
        expand_times.stop_gradient = True
        inputs["ExpandTimes"] = [expand_times]
    else:
        attr, tensors = int_tensor_inputs(helper, list(expand_times), "expand_times")
        if any(t <= 0 for t, v in zip(attr, expand_times) if not isinstance(v, Variable)):
            raise InvalidArgumentError(
                f"expand: expand_times must be positive, got {expand_times}")
        attrs["expand_times"] = attr
        if tensors is not None:
            inputs["expand_times_tensor"] = tensors
    return _simple("expand", "expand", inputs, attrs, name=name)


def expand_as(x, target_tensor, name=None):
    """x tiled to the shape of `target_tensor` (each of its dims a multiple of x's). The
    static shape is target_tensor's (fluid 1.8 leaves it [0, 0, ...] until run time).

    >>> # expand_as(x [2, 3], t [4, 6])  -> [4, 6]
    """
    check_variable(x, "x", "expand_as")
    check_variable(target_tensor, "target_tensor", "expand_as")
    return _simple("expand_as", "expand_as", {"X": [x], "target_tensor": [target_tensor]},
                   name=name)


def flip(input, dims, name=None):
    """input reversed along each axis in `dims`.

    >>> # flip(x, dims=[0])
    """
    check_variable(input, "input", "flip")
    dims = _int_list(dims, "dims", "flip")
    if not dims:
        raise InvalidArgumentError("flip: dims must name at least one axis")
    return _simple("flip", "flip", {"X": [input]}, {"dims": dims}, name=name)


def roll(input, shifts, dims=None):
    """input's entries shifted by `shifts` along `dims` (wrapping around); with dims None the
    flattened tensor is rolled.

    >>> # roll(x, shifts=1, dims=0)
    """
    check_variable(input, "input", "roll")
    shifts = _int_list(shifts, "shifts", "roll")
    if dims is None:
        flat = reshape(input, shape=[-1, 1])
        out = _simple("roll", "roll", {"X": [flat]}, {"dims": [0], "shifts": shifts})
        return reshape(out, shape=list(input.shape))
    dims = _int_list(dims, "dims", "roll")
    return _simple("roll", "roll", {"X": [input]}, {"dims": dims, "shifts": shifts})


def pad(x, paddings, pad_value=0.0, name=None):
    """x padded with `pad_value`: paddings = [before_0, after_0, before_1, after_1, ...].

    >>> # pad(x [2, 3], paddings=[0, 1, 1, 2])  -> [3, 6]
    """
    check_variable(x, "x", "pad")
    return _simple("pad", "pad", {"X": [x]},
                   {"paddings": _int_list(paddings, "paddings", "pad"),
                    "pad_value": float(pad_value)}, name=name)


def pad2d(input, paddings=[0, 0, 0, 0], mode="constant", pad_value=0.0,  # noqa: B006 - fluid
          data_format="NCHW", name=None):
    """The H and W dims of a 4-D input padded by [top, bottom, left, right] (a list or a
    Variable) in mode 'constant', 'reflect' or 'edge'.

    >>> # pad2d(x [1, 1, 2, 2], paddings=[1, 1, 1, 1], mode="edge")  -> [1, 1, 4, 4]
    """
    check_variable(input, "input", "pad2d")
    if mode not in ("constant", "reflect", "edge"):
        raise InvalidArgumentError(
            f"pad2d: mode must be 'constant', 'reflect' or 'edge', got {mode!r}")
    inputs = {"X": [input]}
    attrs = {"mode": mode, "pad_value": float(pad_value), "data_format": data_format}
    if isinstance(paddings, Variable):
        inputs["Paddings"] = [paddings]
        attrs["paddings"] = []
    else:
        attrs["paddings"] = _int_list(paddings, "paddings", "pad2d")
    return _simple("pad2d", "pad2d", inputs, attrs, name=name)


def pad_constant_like(x, y, pad_value=0.0, name=None):
    """y padded at the end of each dim with `pad_value` up to x's shape.

    >>> # pad_constant_like(x [3, 4], y [2, 3])  -> [3, 4]
    """
    check_variable(x, "x", "pad_constant_like")
    check_variable(y, "y", "pad_constant_like")
    return _simple("pad_constant_like", "pad_constant_like", {"X": [x], "Y": [y]},
                   {"pad_value": float(pad_value)}, dtype=y.dtype, name=name)


def stack(x, axis=0):
    """The Variables in x (one shape) stacked along a new axis `axis`.

    >>> # stack([a, b], axis=1)   # a, b [N, 3] -> [N, 2, 3]
    """
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    helper = LayerHelper("stack", x=xs)
    helper.multiple_input("x")
    out = helper.create_variable_for_type_inference(xs[0].dtype)
    helper.append_op("stack", {"X": xs}, {"Y": [out]}, {"axis": int(axis)})
    return out


def unstack(x, axis=0, num=None):
    """The slices of x along `axis` as a list of Variables (num: their count, when x's dim is
    unknown when building).

    >>> # a, b = unstack(x [2, 3], axis=0)
    """
    check_variable(x, "x", "unstack")
    if num is None:
        if x.shape[axis] <= 0:
            raise InvalidArgumentError(
                f"unstack: axis {axis} of {x.name} {list(x.shape)} is unknown; pass num")
        num = x.shape[axis]
    helper = LayerHelper("unstack")
    outs = [helper.create_variable_for_type_inference(x.dtype) for _ in range(num)]
    helper.append_op("unstack", {"X": [x]}, {"Y": outs}, {"axis": int(axis), "num": int(num)})
    return outs


def meshgrid(input, name=None):
    """N 1-D Variables -> N grids of shape [len_0, ..., len_N-1] ('ij' indexing).

    >>> # gx, gy = meshgrid([x, y])
    """
    if not isinstance(input, list):
        raise InvalidArgumentError(f"meshgrid: input must be a list, got {type(input).__name__}")
    helper = LayerHelper("meshgrid", name=name)
    for v in input:
        check_variable(v, "input", "meshgrid")
    outs = [helper.create_variable_for_type_inference(v.dtype) for v in input]
    helper.append_op("meshgrid", {"X": input}, {"Out": outs})
    return outs


def strided_slice(input, axes, starts, ends, strides):
    """input[starts:ends:strides] along each of `axes`; starts/ends/strides may be lists
    holding Variables or 1-D int Variables.

    >>> # strided_slice(x [6], axes=[0], starts=[5], ends=[0], strides=[-2])  -> x[5:0:-2]
    """
    helper = LayerHelper("strided_slice")
    check_variable(input, "input", "strided_slice")
    axes = _int_list(axes, "axes", "strided_slice")
    inputs, attrs = {"Input": [input]}, {"axes": axes}
    flags = [1] * len(axes)
    for key, value in (("starts", starts), ("ends", ends), ("strides", strides)):
        slot = key.capitalize()
        if isinstance(value, Variable):
            value.stop_gradient = True
            inputs[f"{slot}Tensor"] = [value]
            continue
        attr, tensors = int_tensor_inputs(helper, list(value), key)
        if tensors is not None:
            inputs[f"{slot}TensorList"] = tensors
            flags = [-1 if isinstance(v, Variable) else f for v, f in zip(value, flags)]
        attrs[key] = attr
    attrs["infer_flags"] = flags
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("strided_slice", inputs, {"Out": [out]}, attrs)
    return out


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose 2-D planes over (dim1, dim2) hold input's last dim on the diagonal
    `offset`.

    >>> # diag_embed(x [2, 3])  -> [2, 3, 3]
    """
    if not isinstance(input, Variable):
        input = assign(input)
    out = _simple("diag_embed", "diag_embed", {"Input": [input]},
                  {"offset": int(offset), "dim1": int(dim1), "dim2": int(dim2)})
    out.stop_gradient = True
    return out


def shape(input):
    """input's shape at run time, a 1-D int32 Variable.

    >>> # shape(x)   # x [N, 3] fed with N = 4 -> [4, 3]
    """
    check_variable(input, "input", "shape")
    out = _simple("shape", "shape", {"Input": [input]}, dtype="int32")
    out.stop_gradient = True
    return out


def size(input):
    """The number of elements of input at run time, an int64 [1] Variable.

    >>> # size(x)   # x [4, 3] -> [12]
    """
    check_variable(input, "input", "size")
    out = _simple("size", "size", {"Input": [input]}, dtype="int64")
    out.stop_gradient = True
    return out


def rank(input):
    """The number of dims of input, a constant int32 Variable.

    >>> # rank(x)   # x [N, 3] -> 2
    """
    import numpy as np

    check_variable(input, "input", "rank")
    return assign(np.array(input.ndim, "int32"))


def continuous_value_model(input, cvm, use_cvm=True):
    """CTR embeddings whose rows start with show and click counts: with use_cvm those two
    columns become log(show + 1) and log(click + 1) - log(show + 1) ([N, D] -> [N, D]),
    without it they are dropped ([N, D] -> [N, D - 2]). `cvm` is [N, 2] (show, click per row);
    as in fluid, input's gradient carries cvm's values in its first two columns.

    >>> # continuous_value_model(emb [N, 11], show_clk [N, 2], use_cvm=False)  -> [N, 9]
    """
    check_variable(input, "input", "continuous_value_model",
                   dtypes={"float16", "float32", "float64"})
    check_variable(cvm, "cvm", "continuous_value_model")
    helper = LayerHelper("cvm")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("cvm", {"X": [input], "CVM": [cvm]}, {"Y": [out]},
                     {"use_cvm": bool(use_cvm)})
    return out
