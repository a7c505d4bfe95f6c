"""Op definitions: cropping, padding, tiling, flipping, stacking, slicing (plain and strided)
and the CTR show/click features (cvm); slice is in tensor.py, beside its kernel."""
from __future__ import annotations

from .registry import define_op
from .tensor import _norm_axis


def _same_rank(ctx, shape, x, what):
    ctx.check(len(shape) == len(x.shape),
              f"{what} {list(shape)} must have one entry per dim of X {list(x.shape)}")


def _grad_by_same_op(attr_names):
    """Grad maker for ops that are their own inverse (flip, reverse): dX = op(dOut)."""

    def maker(op, g):
        dx, dout = g.in_grad(op.input("X")[0]), g.out_grad(op.output("Out")[0])
        if dx is None or dout is None:
            return []
        return [(op.type, {"X": [dout]}, {"Out": [dx]}, {a: op.attr(a) for a in attr_names})]

    return maker


# -- cropping --------------------------------------------------------------------------------
@define_op("crop", inputs=["X", "Y?", "Offsets?"], outputs=["Out"],
           no_grad_inputs=("Y", "Offsets"), attrs={"offsets": ("ints", []), "shape": ("ints", [])})
def _crop(ctx):
    x = ctx.input("X")
    if ctx.has_input("Y"):
        shape = ctx.input("Y").shape
    else:
        shape = ctx.attr("shape")
        ctx.check(len(shape) > 0, "give the output shape: attribute 'shape' or input Y")
        # fluid 1.8 reads -1 in dim 0 as X's batch size and fails on -1 anywhere else
        ctx.check(all(d > 0 for d in shape[1:]) and shape[0] >= -1 and shape[0] != 0,
                  f"attribute 'shape' {list(shape)} must hold sizes > 0, and -1 only in dim 0 "
                  f"(X's batch size); crop_tensor's -1 keeps the rest of any dim")
    _same_rank(ctx, shape, x, "shape")
    if not ctx.has_input("Offsets") and ctx.attr("offsets"):
        _same_rank(ctx, ctx.attr("offsets"), x, "offsets")
        for i, (o, s, d) in enumerate(zip(ctx.attr("offsets"), shape, x.shape)):
            ctx.check(d < 0 or s < 0 or o + s <= d,
                      f"dim {i}: offset {o} + size {s} runs past X's size {d}")
    ctx.set_output("Out", shape, x.dtype)


@define_op("crop_tensor", inputs=["X", "Shape?", "Offsets?", "ShapeTensor*", "OffsetsTensor*"],
           outputs=["Out"], no_grad_inputs=("Shape", "Offsets", "ShapeTensor", "OffsetsTensor"),
           attrs={"offsets": ("ints", []), "shape": ("ints", [])})
def _crop_tensor(ctx):
    x = ctx.input("X")
    if ctx.has_input("Shape"):
        n = ctx.input("Shape").shape[0]
        ctx.check(n == len(x.shape), f"input Shape must hold {len(x.shape)} sizes, got {n}")
        shape = [-1] * len(x.shape)
    else:
        shape = list(ctx.attr("shape"))
        _same_rank(ctx, shape, x, "shape")
        offsets = ctx.attr("offsets")
        for i, s in enumerate(shape):
            # -1 keeps the rest of X's dim after the offset, 0 is a run-time value
            known = not ctx.has_input("Offsets") and offsets and offsets[i] >= 0
            if s == -1 and x.shape[i] >= 0 and known:
                shape[i] = x.shape[i] - offsets[i]
            elif s <= 0:
                shape[i] = -1
    ctx.set_output("Out", shape, x.dtype)


# -- tiling ----------------------------------------------------------------------------------
@define_op("expand", inputs=["X", "ExpandTimes?", "expand_times_tensor*"], outputs=["Out"],
           no_grad_inputs=("ExpandTimes", "expand_times_tensor"),
           attrs={"expand_times": ("ints", [])})
def _expand(ctx):
    x = ctx.input("X")
    if ctx.has_input("ExpandTimes"):
        ctx.set_output("Out", [-1] * len(x.shape), x.dtype)
        return
    times = ctx.attr("expand_times")
    _same_rank(ctx, times, x, "expand_times")
    ctx.set_output("Out", [-1 if t < 0 or d < 0 else d * t for d, t in zip(x.shape, times)],
                   x.dtype)


@define_op("expand_as", inputs=["X", "target_tensor"], outputs=["Out"],
           no_grad_inputs=("target_tensor",))
def _expand_as(ctx):
    x, target = ctx.input("X"), ctx.input("target_tensor")
    _same_rank(ctx, target.shape, x, "target_tensor's shape")
    for i, (d, t) in enumerate(zip(x.shape, target.shape)):
        ctx.check(d < 0 or t < 0 or t % d == 0,
                  f"dim {i}: target size {t} is not a multiple of X's size {d}")
    ctx.set_output("Out", target.shape, x.dtype)


# -- flipping and rolling --------------------------------------------------------------------
@define_op("flip", inputs=["X"], outputs=["Out"], grad=_grad_by_same_op(["dims"]),
           attrs={"dims": ("ints", [])})
def _flip(ctx):
    x = ctx.input("X")
    for a in ctx.attr("dims"):
        _norm_axis(ctx, a, len(x.shape), "dims entry")
    ctx.set_output_like("Out", "X")


@define_op("reverse", inputs=["X"], outputs=["Out"], grad=_grad_by_same_op(["axis"]),
           attrs={"axis": ("ints", [])})
def _reverse(ctx):
    x = ctx.input("X")
    ctx.check(len(ctx.attr("axis")) > 0, "attribute 'axis' must name at least one axis")
    for a in ctx.attr("axis"):
        _norm_axis(ctx, a, len(x.shape), "axis entry")
    ctx.set_output_like("Out", "X")


@define_op("roll", inputs=["X"], outputs=["Out"], grad_uses=("X",),
           attrs={"shifts": ("ints", []), "dims": ("ints", [])})
def _roll(ctx):
    x = ctx.input("X")
    shifts, dims = ctx.attr("shifts"), ctx.attr("dims")
    ctx.check(len(shifts) == len(dims),
              f"shifts {shifts} and dims {dims} must have the same length")
    for a in dims:
        _norm_axis(ctx, a, len(x.shape), "dims entry")
    ctx.set_output_like("Out", "X")


# -- padding ---------------------------------------------------------------------------------
@define_op("pad", inputs=["X"], outputs=["Out"], grad_uses=("X",),
           attrs={"paddings": ("ints", []), "pad_value": ("float", 0.0)})
def _pad(ctx):
    x, pads = ctx.input("X"), ctx.attr("paddings")
    ctx.check(len(pads) == 2 * len(x.shape),
              f"paddings must hold 2 entries (before, after) per dim of X {list(x.shape)}, "
              f"got {pads}")
    ctx.check(all(p >= 0 for p in pads), f"paddings must be >= 0, got {pads}")
    ctx.set_output("Out", [-1 if d < 0 else d + pads[2 * i] + pads[2 * i + 1]
                           for i, d in enumerate(x.shape)], x.dtype)


@define_op("pad2d", inputs=["X", "Paddings?"], outputs=["Out"], no_grad_inputs=("Paddings",),
           grad_uses=("X", "Paddings"),
           attrs={"paddings": ("ints", [0, 0, 0, 0]), "pad_value": ("float", 0.0),
                  "mode": ("str", "constant"), "data_format": ("str", "NCHW")})
def _pad2d(ctx):
    x = ctx.input("X")
    ctx.check(len(x.shape) == 4, f"X must be 4-D, got {list(x.shape)}")
    ctx.check(ctx.attr("mode") in ("constant", "reflect", "edge"),
              f"mode must be 'constant', 'reflect' or 'edge', got {ctx.attr('mode')!r}")
    fmt = ctx.attr("data_format")
    ctx.check(fmt in ("NCHW", "NHWC"), f"data_format must be 'NCHW' or 'NHWC', got {fmt!r}")
    h, w = (2, 3) if fmt == "NCHW" else (1, 2)
    shape = list(x.shape)
    if ctx.has_input("Paddings"):
        shape[h] = shape[w] = -1
    else:
        p = ctx.attr("paddings")
        ctx.check(len(p) == 4 and min(p) >= 0,
                  f"paddings must be [top, bottom, left, right] >= 0, got {p}")
        shape[h] = -1 if shape[h] < 0 else shape[h] + p[0] + p[1]
        shape[w] = -1 if shape[w] < 0 else shape[w] + p[2] + p[3]
    ctx.set_output("Out", shape, x.dtype)


@define_op("pad_constant_like", inputs=["X", "Y"], outputs=["Out"], no_grad_inputs=("X",),
           grad_uses=("Y",), attrs={"pad_value": ("float", 0.0)})
def _pad_constant_like(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    _same_rank(ctx, y.shape, x, "Y's shape")
    for i, (a, b) in enumerate(zip(x.shape, y.shape)):
        ctx.check(a < 0 or b < 0 or a >= b, f"dim {i}: Y ({b}) is larger than X ({a})")
    ctx.set_output("Out", x.shape, y.dtype)


# -- stacking --------------------------------------------------------------------------------
@define_op("stack", inputs=["X*"], outputs=["Y"], grad_uses=("X",), attrs={"axis": ("int", 0)})
def _stack(ctx):
    xs = ctx.inputs("X")
    ctx.check(len(xs) > 0, "needs at least one input in X")
    for x in xs[1:]:
        ctx.check(len(x.shape) == len(xs[0].shape) and all(
            a < 0 or b < 0 or a == b for a, b in zip(x.shape, xs[0].shape)),
            f"all inputs must have one shape: {xs[0].name}{list(xs[0].shape)} vs "
            f"{x.name}{list(x.shape)}")
    rank = len(xs[0].shape) + 1
    axis = _norm_axis(ctx, ctx.attr("axis"), rank)
    shape = list(xs[0].shape)
    shape.insert(axis, len(xs))
    ctx.set_output("Y", shape, xs[0].dtype)


@define_op("unstack", inputs=["X"], outputs=["Y*"], grad_uses=("X",),
           attrs={"axis": ("int", 0), "num": ("int", 0)})
def _unstack(ctx):
    x = ctx.input("X")
    axis = _norm_axis(ctx, ctx.attr("axis"), len(x.shape))
    n = ctx.num_outputs("Y")
    ctx.check(x.shape[axis] < 0 or x.shape[axis] == n,
              f"axis {axis} of X {list(x.shape)} has size {x.shape[axis]}, but Y has {n} outputs")
    shape = [d for i, d in enumerate(x.shape) if i != axis]
    ctx.set_output("Y", shape, x.dtype)


@define_op("meshgrid", inputs=["X*"], outputs=["Out*"], grad_uses=("X",))
def _meshgrid(ctx):
    xs = ctx.inputs("X")
    ctx.check(len(xs) >= 1 and ctx.num_outputs("Out") == len(xs),
              f"meshgrid takes N >= 1 inputs and gives N outputs, got {len(xs)} and "
              f"{ctx.num_outputs('Out')}")
    for x in xs:
        ctx.check(len(x.shape) == 1, f"every input must be 1-D, {x.name} is {list(x.shape)}")
    ctx.set_output("Out", [x.shape[0] for x in xs], xs[0].dtype)


_STRIDED_TENSORS = ["StartsTensor?", "EndsTensor?", "StridesTensor?", "StartsTensorList*",
                    "EndsTensorList*", "StridesTensorList*"]


def strided_axis(start: int, end: int, stride: int) -> slice:
    """fluid's bounds for one strided_slice axis as a python slice: numpy's clamping, except
    that end -1 with a negative stride means "through index 0" (fluid's spelling of a
    missing stop, as in x[3::-1]), not "stop before the last element".

    fluid 1.8's CPU kernel aligns a negative stride of 2 or more to `end` instead of `start`
    (x[5:1:-2] gives [4, 2]); spmd gives python's [5, 3]: tests/unit/test_layers_manip_oracle.py.
    """
    return slice(start, None if (end == -1 and stride < 0) else end, stride)


def empty_strided_message(axis: int, size: int, sl: slice) -> str:
    return (f"strided_slice selects nothing along axis {axis} (size {size}) with start "
            f"{sl.start}, end {sl.stop}, stride {sl.step}; fluid rejects an empty slice too: "
            f"check the bounds' signs against the stride's")


@define_op("strided_slice", inputs=["Input", *_STRIDED_TENSORS], outputs=["Out"],
           no_grad_inputs=tuple(s.rstrip("?*") for s in _STRIDED_TENSORS),
           attrs={"axes": ("ints", []), "starts": ("ints", []), "ends": ("ints", []),
                  "strides": ("ints", []), "infer_flags": ("ints", []),
                  "decrease_axis": ("ints", [])})
def _strided_slice(ctx):
    x = ctx.input("Input")
    axes = ctx.attr("axes")
    # a whole 1-D bounds tensor hides every axis until run time; with per-axis [1] tensors
    # (the *TensorList inputs) infer_flags marks the axes they hide, the rest stay known
    runtime = any(ctx.has_input(s.rstrip("?*")) for s in _STRIDED_TENSORS
                  if not s.rstrip("?*").endswith("List"))
    listed = any(ctx.has_input(s.rstrip("?*")) for s in _STRIDED_TENSORS)
    starts, ends, strides = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("strides")
    if listed and not (ctx.attr("infer_flags") and len(axes) == len(starts) == len(ends)
                       == len(strides)):
        runtime = True  # no per-axis flags to tell the hidden axes: all wait for run time
    if not listed:
        ctx.check(len(starts) == len(ends) == len(strides) == len(axes),
                  f"axes, starts, ends and strides need one entry per axis, got axes={axes}, "
                  f"starts={starts}, ends={ends}, strides={strides}")
    flags = ctx.attr("infer_flags") or [1] * len(axes)
    out = list(x.shape)
    for i, a in enumerate(axes):
        a = _norm_axis(ctx, a, len(x.shape), "axes entry")
        if runtime or flags[i] == -1 or x.shape[a] < 0:
            out[a] = -1
            continue
        ctx.check(strides[i] != 0, f"strides must not be 0, got {strides}")
        sl = strided_axis(starts[i], ends[i], strides[i])
        out[a] = len(range(*sl.indices(x.shape[a])))
        ctx.check(out[a] > 0, empty_strided_message(a, x.shape[a], sl))
    dec = ctx.attr("decrease_axis")
    if dec:
        out = [d for i, d in enumerate(out) if i not in dec] or [1]
    ctx.set_output("Out", out, x.dtype)


# -- diagonals and triangles -----------------------------------------------------------------
@define_op("diag_embed", inputs=["Input"], outputs=["Out"], grad=None,
           attrs={"offset": ("int", 0), "dim1": ("int", -2), "dim2": ("int", -1)})
def _diag_embed(ctx):
    x = ctx.input("Input")
    rank = len(x.shape) + 1
    d1 = _norm_axis(ctx, ctx.attr("dim1"), rank, "dim1")
    d2 = _norm_axis(ctx, ctx.attr("dim2"), rank, "dim2")
    ctx.check(d1 != d2, f"dim1 and dim2 must differ, got {ctx.attr('dim1')}, {ctx.attr('dim2')}")
    n = x.shape[-1]
    size = -1 if n < 0 else n + abs(ctx.attr("offset"))
    rest = list(x.shape[:-1])
    shape = []
    for i in range(rank):
        shape.append(size if i in (d1, d2) else rest.pop(0))
    ctx.set_output("Out", shape, x.dtype)


@define_op("tril_triu", inputs=["X"], outputs=["Out"], grad_uses=("X",),
           attrs={"diagonal": ("int", 0), "lower": ("bool", True)})
def _tril_triu(ctx):
    x = ctx.input("X")
    ctx.check(len(x.shape) >= 2, f"X must have rank >= 2, got {list(x.shape)}")
    ctx.set_output_like("Out", "X")


# -- shape queries ---------------------------------------------------------------------------
@define_op("shape", inputs=["Input"], outputs=["Out"], grad=None)
def _shape(ctx):
    ctx.set_output("Out", (len(ctx.input("Input").shape),), "int32")


@define_op("size", inputs=["Input"], outputs=["Out"], grad=None)
def _size(ctx):
    ctx.set_output("Out", (1,), "int64")


# -- CTR features ----------------------------------------------------------------------------
@define_op("cvm", inputs=["X", "CVM"], outputs=["Y"], no_grad_inputs=("CVM",),
           grad_uses=("X", "CVM"), attrs={"use_cvm": ("bool", True)})
def _cvm(ctx):
    """Y is X with its first two columns (show, click) turned into log features (use_cvm) or
    dropped (not use_cvm). The gradient follows fluid: X@GRAD's first two columns are CVM's
    show and click, which CTR training sends back with the embedding gradient."""
    x, cvm = ctx.input("X"), ctx.input("CVM")
    ctx.check(len(x.shape) == 2, f"X must be 2-D [N, 2 + embedding dim], got {list(x.shape)}")
    ctx.check(x.shape[1] < 0 or x.shape[1] >= 2,
              f"X's rows must start with show and click: need width >= 2, got {list(x.shape)}")
    ctx.check(len(cvm.shape) == 2 and cvm.shape[1] in (2, -1),
              f"CVM must be [N, 2] (show, click per row), got {list(cvm.shape)}")
    width = x.shape[1] if ctx.attr("use_cvm") or x.shape[1] < 0 else x.shape[1] - 2
    ctx.set_output("Y", (x.shape[0], width), x.dtype)
