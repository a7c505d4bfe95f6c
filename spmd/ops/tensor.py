"""Op definitions: creation, copying, casting, reshaping, joining, slicing and splitting of
tensors; gather, one_hot and the embedding lookups (lookup_table, lookup_table_v2)."""
from __future__ import annotations

from .registry import REQUIRED, define_op

SHAPE_TENSORS = ["ShapeTensor?", "ShapeTensorList*"]


def shape_from_tensors(ctx) -> list:
    """The output shape of an op whose `shape` may come at run time: from ShapeTensor (a 1-D
    int tensor: only its length is known now) or ShapeTensorList (one [1] tensor per dim; the
    attribute holds -1 for those), else the `shape` attribute."""
    shape = list(ctx.attr("shape"))
    if ctx.has_input("ShapeTensor"):
        t = ctx.input("ShapeTensor")
        _check_int_dtype(ctx, t, "ShapeTensor")
        n = t.shape[0] if t.shape and t.shape[0] >= 0 else len(shape)
        ctx.check(n > 0, "ShapeTensor has an unknown length: cannot tell the rank of Out")
        return [-1] * n
    if ctx.has_input("ShapeTensorList"):
        n = len(ctx.inputs("ShapeTensorList"))
        return shape if len(shape) == n else [-1] * n
    return shape


@define_op("fill_constant", inputs=["ValueTensor?", *SHAPE_TENSORS], outputs=["Out"], grad=None,
           attrs={"shape": ("ints", []), "value": ("float", 0.0), "dtype": ("dtype", "float32"),
                  "str_value": ("str", ""), "force_cpu": ("bool", False)})
def _fill_constant(ctx):
    ctx.set_output("Out", shape_from_tensors(ctx), ctx.attr("dtype"))


@define_op("fill_any_like", inputs=["X"], outputs=["Out"], grad=None,
           attrs={"value": ("float", 0.0), "dtype": ("any", None)})
def _fill_any_like(ctx):
    x = ctx.input("X")
    dtype = ctx.attr("dtype")
    ctx.set_output("Out", x.shape, x.dtype if dtype in (None, -1) else _dtype(dtype))


def _dtype(value):
    from .registry import _dtype_name

    return _dtype_name(value)


@define_op("fill_zeros_like", inputs=["X"], outputs=["Out"], grad=None)
def _fill_zeros_like(ctx):
    ctx.set_output_like("Out", "X")


def _assign_grad(op, g):
    dx = g.in_grad(op.input("X")[0])
    dout = g.out_grad(op.output("Out")[0])
    if dx is None or dout is None:
        return []
    return [("assign", {"X": [dout]}, {"Out": [dx]}, {})]


@define_op("assign", inputs=["X"], outputs=["Out"], grad=_assign_grad, row_separable=True)
def _assign(ctx):
    ctx.set_output_like("Out", "X")


# -- shape helpers ---------------------------------------------------------------------------
def _prod(dims) -> int:
    """Product of dims, or -1 when any of them is unknown."""
    total = 1
    for d in dims:
        if d < 0:
            return -1
        total *= d
    return total


def _norm_axis(ctx, axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [-rank, rank) made non-negative, or a user error naming the valid range."""
    ctx.check(-rank <= axis < rank,
              f"{what}={axis} is out of range for a rank-{rank} input: expected an axis in "
              f"[{-rank}, {rank - 1}]")
    return axis + rank if axis < 0 else axis


def _check_int_dtype(ctx, info, slot: str):
    ctx.check(info.dtype.startswith(("int", "uint")),
              f"input {slot} ('{info.name}') must hold integer ids: expected int32 or int64, "
              f"got {info.dtype}")


def _xshape(ctx, x):
    """XShape records X's shape for the grad op without holding X's data: [0] + X.shape."""
    ctx.set_output("XShape", (0,) + tuple(x.shape), x.dtype)


# -- cast ------------------------------------------------------------------------------------
def _cast_grad(op, g):
    """The gradient of a cast is the output gradient cast back to the input's dtype."""
    x, out = op.input("X")[0], op.output("Out")[0]
    dx, dout = g.in_grad(x), g.out_grad(out)
    if dx is None or dout is None:
        return []
    # the input var's own dtype, not in_dtype: fluid's kernel follows the tensor, not the attr
    x_dtype = g.block.var(x).dtype
    return [("cast", {"X": [dout]}, {"Out": [dx]},
             {"in_dtype": op.attr("out_dtype"), "out_dtype": x_dtype})]


@define_op("cast", inputs=["X"], outputs=["Out"], grad=_cast_grad, row_separable=True,
           attrs={"in_dtype": ("dtype", REQUIRED), "out_dtype": ("dtype", REQUIRED)})
def _cast(ctx):
    ctx.set_output("Out", ctx.input("X").shape, ctx.attr("out_dtype"))


# -- reshaping, all with XShape: the grad op reads XShape instead of keeping X alive -----------
def reshape_target(ctx, in_shape, shape) -> tuple:
    """fluid's reshape rule: 0 copies the input dim at that index, one -1 is inferred."""
    ctx.check(len(shape) > 0, "attribute 'shape' must list at least one dimension, got []")
    ctx.check(sum(d == -1 for d in shape) <= 1,
              f"attribute 'shape' may hold at most one -1 (inferred dim), got {shape}")
    out, copied = [], set()
    for i, d in enumerate(shape):
        ctx.check(d >= -1, f"attribute 'shape' holds {d} at index {i}: expected a size > 0, "
                           f"0 (copy the input dim) or -1 (infer), got {shape}")
        if d == 0:
            ctx.check(i < len(in_shape),
                      f"shape[{i}] = 0 copies input dim {i}, but X has rank {len(in_shape)} "
                      f"(X shape {list(in_shape)}, shape {shape})")
            copied.add(i)
            out.append(in_shape[i])
        else:
            out.append(d)
    if -1 in shape:
        k = shape.index(-1)
        # unknown input dims copied through 0 cancel out; any other unknown one makes the
        # inferred dim unknown too
        unknown_left = [i for i, d in enumerate(in_shape) if d < 0 and i not in copied]
        if not unknown_left:
            have = _prod(d for i, d in enumerate(in_shape) if i not in copied)
            rest = _prod(d for i, d in enumerate(out) if i != k and i not in copied)
            ctx.check(rest > 0 and have % rest == 0,
                      f"cannot reshape X{list(in_shape)} to {shape}: {have} elements do not "
                      f"divide into blocks of {rest}")
            out[k] = have // rest
    else:
        total_in, total_out = _prod(in_shape), _prod(out)
        ctx.check(total_in < 0 or total_out < 0 or total_in == total_out,
                  f"cannot reshape X{list(in_shape)} ({total_in} elements) to {shape} "
                  f"({total_out} elements)")
    return tuple(out)


_RESHAPE_GRAD = dict(grad_uses=("XShape",), nondiff_outputs=("XShape",))


@define_op("reshape2", inputs=["X", "Shape?", "ShapeTensor*"], outputs=["Out", "XShape"],
           no_grad_inputs=("Shape", "ShapeTensor"), attrs={"shape": ("ints", []),
                                             "use_quantizer": ("bool", False)},
           **_RESHAPE_GRAD)
def _reshape2(ctx):
    x = ctx.input("X")
    if ctx.has_input("Shape") and ctx.attr("shape"):
        # fluid's actual_shape: the values come at run time, but the static shape (what the
        # layers after it see) follows the `shape` attribute, as fluid 1.8's does
        _check_int_dtype(ctx, ctx.input("Shape"), "Shape")
        out = reshape_target(ctx, x.shape, ctx.attr("shape"))
    elif ctx.has_input("Shape"):
        # the values come at run time: only the rank is known now
        s = ctx.input("Shape")
        _check_int_dtype(ctx, s, "Shape")
        ctx.check(len(s.shape) == 1, f"input Shape must be 1-D, got shape {list(s.shape)}")
        rank = s.shape[0] if s.shape[0] > 0 else len(ctx.attr("shape"))
        ctx.check(rank > 0, "input Shape has an unknown length and attribute 'shape' is empty: "
                            "cannot tell the rank of Out")
        out = (-1,) * rank
    elif ctx.has_input("ShapeTensor"):
        n = len(ctx.inputs("ShapeTensor"))
        attr = ctx.attr("shape")
        # as fluid 1.8: the int entries stay known (0 copies the input dim); the Variable
        # entries (-1 in the attribute) and the inferred dim wait for run time
        out = tuple(d if d > 0 else x.shape[i] if d == 0 and i < len(x.shape) else -1
                    for i, d in enumerate(attr)) if len(attr) == n else (-1,) * n
    else:
        out = reshape_target(ctx, x.shape, ctx.attr("shape"))
    ctx.set_output("Out", out, x.dtype)
    _xshape(ctx, x)


@define_op("transpose2", inputs=["X"], outputs=["Out", "XShape"],
           attrs={"axis": ("ints", REQUIRED), "use_mkldnn": ("bool", False),
                  "data_format": ("str", "AnyLayout")}, **_RESHAPE_GRAD)
def _transpose2(ctx):
    x, axis = ctx.input("X"), ctx.attr("axis")
    rank = len(x.shape)
    ctx.check(sorted(axis) == list(range(rank)),
              f"attribute 'axis' must be a permutation of 0..{rank - 1} for X{list(x.shape)}, "
              f"got {axis}")
    ctx.set_output("Out", tuple(x.shape[a] for a in axis), x.dtype)
    _xshape(ctx, x)


@define_op("flatten2", inputs=["X"], outputs=["Out", "XShape"],
           attrs={"axis": ("int", 1)}, **_RESHAPE_GRAD)
def _flatten2(ctx):
    x, axis = ctx.input("X"), ctx.attr("axis")
    rank = len(x.shape)
    ctx.check(0 <= axis <= rank,
              f"attribute 'axis' must be in [0, {rank}] for X{list(x.shape)}, got {axis}")
    ctx.set_output("Out", (_prod(x.shape[:axis]), _prod(x.shape[axis:])), x.dtype)
    _xshape(ctx, x)


def squeeze_shape(ctx, shape, axes) -> tuple:
    """fluid's squeeze rule: no axes = every size-1 dim; named axes go only where they are 1
    (or unknown, at compile time)."""
    rank = len(shape)
    if not axes:
        drop = {i for i, d in enumerate(shape) if d == 1}
    else:
        drop = set()
        for a in axes:
            i = _norm_axis(ctx, a, rank, "axes entry")
            if shape[i] in (1, -1):
                drop.add(i)
    return tuple(d for i, d in enumerate(shape) if i not in drop)


@define_op("squeeze2", inputs=["X"], outputs=["Out", "XShape"],
           attrs={"axes": ("ints", [])}, **_RESHAPE_GRAD)
def _squeeze2(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", squeeze_shape(ctx, x.shape, ctx.attr("axes")), x.dtype)
    _xshape(ctx, x)


def unsqueeze_shape(ctx, shape, axes) -> tuple:
    """fluid's unsqueeze rule: axes are inserted one after another, each against the rank
    reached so far (a negative axis counts from the end of that)."""
    ctx.check(len(axes) > 0, "attribute 'axes' must name at least one axis to insert, got []")
    out = list(shape)
    for a in axes:
        cur = a + len(out) + 1 if a < 0 else a
        ctx.check(0 <= cur <= len(out),
                  f"axes entry {a} is out of range when inserting into rank {len(out)}: "
                  f"expected [{-len(out) - 1}, {len(out)}]")
        out.insert(cur, 1)
    return tuple(out)


@define_op("unsqueeze2", inputs=["X"], outputs=["Out", "XShape"],
           attrs={"axes": ("ints", [])}, **_RESHAPE_GRAD)
def _unsqueeze2(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", unsqueeze_shape(ctx, x.shape, ctx.attr("axes")), x.dtype)
    _xshape(ctx, x)


# -- joining and cutting ---------------------------------------------------------------------
@define_op("concat", inputs=["X*", "AxisTensor?"], outputs=["Out"],
           grad_uses=("X", "AxisTensor"), no_grad_inputs=("AxisTensor",),
           attrs={"axis": ("int", 0), "use_mkldnn": ("bool", False),
                  "use_quantizer": ("bool", False)})
def _concat(ctx):
    """Out joins X along `axis`, or along the axis held in AxisTensor (an int tensor of one
    value, read at run time; then only Out's rank is known now, as in fluid)."""
    xs = ctx.inputs("X")
    ctx.check(len(xs) > 0, "needs at least one input in X")
    first = xs[0]
    rank = len(first.shape)
    if ctx.has_input("AxisTensor"):
        t = ctx.input("AxisTensor")
        _check_int_dtype(ctx, t, "AxisTensor")
        ctx.check(tuple(t.shape) in ((1,), (-1,)),
                  f"AxisTensor must hold one axis (shape [1]), got shape {list(t.shape)}")
        for x in xs[1:]:
            ctx.check(len(x.shape) == rank and x.dtype == first.dtype,
                      f"inputs differ in rank or dtype: {first.name}{list(first.shape)} "
                      f"{first.dtype} vs {x.name}{list(x.shape)} {x.dtype}")
        ctx.set_output("Out", [-1] * rank, first.dtype)
        return
    axis = _norm_axis(ctx, ctx.attr("axis"), rank)
    out = list(first.shape)
    for x in xs[1:]:
        ctx.check(len(x.shape) == rank,
                  f"inputs differ in rank: {first.name}{list(first.shape)} vs "
                  f"{x.name}{list(x.shape)}")
        ctx.check(x.dtype == first.dtype,
                  f"inputs differ in dtype: {first.name} is {first.dtype}, {x.name} is {x.dtype}")
        for i, d in enumerate(x.shape):
            if i == axis:
                out[i] = -1 if out[i] < 0 or d < 0 else out[i] + d
            elif out[i] < 0:
                out[i] = d
            else:
                ctx.check(d < 0 or d == out[i],
                          f"inputs differ in dim {i} (all dims but axis {axis} must match): "
                          f"{first.name}{list(first.shape)} vs {x.name}{list(x.shape)}")
    ctx.set_output("Out", out, first.dtype)


def split_sizes(ctx, dim: int, num: int, sections: list, n_out: int) -> list:
    """Sizes of the pieces along the split axis (-1 where unknown until run time)."""
    ctx.check((num > 0) != bool(sections),
              f"give either num > 0 or sections, not both and not neither "
              f"(got num={num}, sections={sections})")
    if num > 0:
        ctx.check(n_out == num, f"num={num} pieces but {n_out} output variables in Out")
        if dim < 0:
            return [-1] * num
        ctx.check(dim % num == 0, f"the split axis has size {dim}, not divisible by num={num}")
        return [dim // num] * num
    ctx.check(n_out == len(sections),
              f"sections={sections} makes {len(sections)} pieces but Out has {n_out} variables")
    ctx.check(sum(s == -1 for s in sections) <= 1 and all(s >= -1 for s in sections),
              f"sections may hold sizes >= 0 and at most one -1 (inferred), got {sections}")
    if dim < 0:
        return list(sections)
    known = sum(s for s in sections if s >= 0)
    if -1 in sections:
        ctx.check(known <= dim, f"sections={sections} need more than the {dim} elements of the "
                                f"split axis")
        return [dim - known if s == -1 else s for s in sections]
    ctx.check(known == dim, f"sections={sections} add up to {known}, but the split axis has "
                            f"size {dim}")
    return list(sections)


def _split_grad(op, g):
    """The gradient of split is the concat of its outputs' gradients (zeros where none)."""
    dx = g.in_grad(op.input("X")[0])
    outs = op.output("Out")
    if dx is None or all(g.out_grad(n) is None for n in outs):
        return []
    douts = [g.out_grad_or_zeros(n) for n in outs]
    ins = {"X": douts}
    if op.input("AxisTensor"):
        # the axis is a run-time value: the concat reads the same tensor the split read
        ins["AxisTensor"] = op.input("AxisTensor")
    return [("concat", ins, {"Out": [dx]}, {"axis": op.attr("axis")})]


@define_op("split", inputs=["X", "AxisTensor?", "SectionsTensorList*"], outputs=["Out*"],
           grad=_split_grad, no_grad_inputs=("AxisTensor", "SectionsTensorList"),
           attrs={"num": ("int", 0), "sections": ("ints", []), "axis": ("int", 0)})
def _split(ctx):
    x = ctx.input("X")
    if ctx.has_input("AxisTensor") or ctx.has_input("SectionsTensorList"):
        # the axis or the sizes come at run time: only the number of pieces is known now
        shape = list(x.shape)
        if ctx.has_input("AxisTensor"):
            shape = [-1] * len(shape)
        else:
            shape[_norm_axis(ctx, ctx.attr("axis"), len(shape))] = -1
        ctx.set_output("Out", shape, x.dtype)
        return
    axis = _norm_axis(ctx, ctx.attr("axis"), len(x.shape))
    sizes = split_sizes(ctx, x.shape[axis], ctx.attr("num"), ctx.attr("sections"),
                        ctx.num_outputs("Out"))
    for i, s in enumerate(sizes):
        shape = list(x.shape)
        shape[axis] = s
        ctx.set_output("Out", shape, x.dtype, index=i)


# -- gathering rows, one-hot, and the lookup tables behind embedding ---------------------------
@define_op("gather", inputs=["X", "Index"], outputs=["Out"], no_grad_inputs=("Index",),
           grad_uses=("X", "Index"), attrs={"overwrite": ("bool", True)})
def _gather(ctx):
    x, index = ctx.input("X"), ctx.input("Index")
    _check_int_dtype(ctx, index, "Index")
    ctx.check(len(x.shape) >= 1, "X must have rank >= 1, got a scalar")
    ctx.check(len(index.shape) == 1 or (len(index.shape) == 2 and index.shape[1] in (1, -1)),
              f"Index must be 1-D or [N, 1], got shape {list(index.shape)}")
    ctx.set_output("Out", (index.shape[0],) + tuple(x.shape[1:]), x.dtype)


@define_op("one_hot", inputs=["X", "depth_tensor?"], outputs=["Out"], grad=None,
           attrs={"depth": ("int", -1), "dtype": ("dtype", "float32"),
                  "allow_out_of_range": ("bool", False)})
def _one_hot(ctx):
    x, depth = ctx.input("X"), ctx.attr("depth")
    _check_int_dtype(ctx, x, "X")
    if ctx.has_input("depth_tensor"):  # a [1] int tensor: the depth is known at run time
        _check_int_dtype(ctx, ctx.input("depth_tensor"), "depth_tensor")
        depth = -1
    else:
        ctx.check(depth > 0, f"attribute 'depth' must be > 0, got {depth}")
    ctx.check(len(x.shape) >= 2 and x.shape[-1] in (1, -1),
              f"X must have rank >= 2 with last dim 1 (e.g. [N, 1]), got {list(x.shape)}")
    ctx.set_output("Out", tuple(x.shape[:-1]) + (depth,), ctx.attr("dtype"))


_LOOKUP_ATTRS = {"is_sparse": ("bool", False), "is_distributed": ("bool", False),
                 "padding_idx": ("int", -1), "remote_prefetch": ("bool", False),
                 "trainer_id": ("int", 0), "height_sections": ("ints", []),
                 "epmap": ("strs", []), "table_names": ("strs", [])}


def _lookup_infer(ctx, trailing_one: bool):
    w, ids = ctx.input("W"), ctx.input("Ids")
    _check_int_dtype(ctx, ids, "Ids")
    ctx.check(len(w.shape) == 2, f"W must be a 2-D table [rows, width], got {list(w.shape)}")
    if trailing_one:
        ctx.check(tuple(ids.shape[-1:]) == (1,) or (len(ids.shape) >= 2 and ids.shape[-1] == -1),
                  f"Ids must end in a dim of 1 (e.g. [N, 1]), got {list(ids.shape)}; "
                  f"lookup_table_v2 takes ids without it")
        lead = tuple(ids.shape[:-1])
    else:
        lead = tuple(ids.shape)
    pad, rows = ctx.attr("padding_idx"), w.shape[0]
    ctx.check(pad >= -1 and (rows < 0 or pad < rows),
              f"padding_idx must be -1 (none) or a row of W in [0, {rows - 1}], got {pad}")
    ctx.set_output("Out", lead + (w.shape[1],), w.dtype)


@define_op("lookup_table", inputs=["W", "Ids"], outputs=["Out"], no_grad_inputs=("Ids",),
           grad_uses=("W", "Ids"), attrs={**_LOOKUP_ATTRS, "grad_inplace": ("bool", False)})
def _lookup_table(ctx):
    _lookup_infer(ctx, trailing_one=True)


@define_op("lookup_table_v2", inputs=["W", "Ids"], outputs=["Out"], no_grad_inputs=("Ids",),
           grad_uses=("W", "Ids"), attrs=dict(_LOOKUP_ATTRS))
def _lookup_table_v2(ctx):
    _lookup_infer(ctx, trailing_one=False)


# -- slicing, plain and with strides ---------------------------------------------------------
SLICE_TENSORS = ["StartsTensor?", "EndsTensor?", "StartsTensorList*", "EndsTensorList*"]


@define_op("slice", inputs=["Input", *SLICE_TENSORS], outputs=["Out"],
           no_grad_inputs=tuple(s.rstrip("?*") for s in SLICE_TENSORS),
           attrs={"axes": ("ints", REQUIRED), "starts": ("ints", []), "ends": ("ints", []),
                  "infer_flags": ("ints", []), "decrease_axis": ("ints", [])})
def _slice(ctx):
    x = ctx.input("Input")
    axes, starts, ends = ctx.attr("axes"), ctx.attr("starts"), ctx.attr("ends")
    # bounds given as tensors are known at run time only: those axes get size -1
    flags = list(ctx.attr("infer_flags")) or [1] * len(axes)
    if ctx.has_input("StartsTensor") or ctx.has_input("EndsTensor"):
        flags = [-1] * len(axes)
    starts = starts if len(starts) == len(axes) else [0] * len(axes)
    ends = ends if len(ends) == len(axes) else [-1] * len(axes)
    ctx.check(len(flags) == len(axes), f"infer_flags {flags} must match axes {axes}")
    ctx.check(len(starts) == len(axes) and len(ends) == len(axes),
              f"axes, starts and ends must have one entry each per sliced axis, got "
              f"axes={axes}, starts={starts}, ends={ends}")
    rank = len(x.shape)
    out = list(x.shape)
    seen = set()
    for a, s, e, flag in zip(axes, starts, ends, flags):
        ctx.check(0 <= a < rank, f"axes entry {a} is out of range for Input{list(x.shape)}: "
                                 f"expected [0, {rank - 1}]")
        ctx.check(a not in seen, f"axis {a} is sliced twice (axes={axes})")
        seen.add(a)
        if x.shape[a] >= 0 and flag != -1:
            # python slicing clamps negative and out-of-range bounds exactly as fluid does
            lo, hi, _ = slice(s, e).indices(x.shape[a])
            ctx.check(hi > lo, f"slice [{s}:{e}] of axis {a} (size {x.shape[a]}) is empty")
            out[a] = hi - lo
        else:
            out[a] = -1
    decrease = ctx.attr("decrease_axis")
    for a in decrease:
        ctx.check(a in seen, f"decrease_axis entry {a} is not one of the sliced axes {axes}")
        ctx.check(out[a] in (1, -1),
                  f"decrease_axis removes axis {a}, which must be sliced to size 1, got {out[a]}")
    if decrease:
        out = [d for i, d in enumerate(out) if i not in decrease] or [1]  # fluid keeps [1]
    ctx.set_output("Out", out, x.dtype)
