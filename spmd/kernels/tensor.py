"""Kernels: creation, copying and reshaping of tensors."""
from __future__ import annotations

import math

import numpy as np

from ..core.selected_rows import SelectedRows, add_rows
from ..errors import InvalidArgumentError
from .registry import kernel


def ints_of(a) -> list[int]:
    """A small int tensor (a shape, bounds) as python ints, wherever it lives."""
    return [int(v) for v in (a.get() if hasattr(a, "get") else np.asarray(a)).reshape(-1)]


def shape_arg(ins, attrs, tensor="ShapeTensor", tensors="ShapeTensorList", attr="shape"):
    """The run-time shape: a 1-D tensor, else one [1] tensor per dim, else the attribute."""
    if ins.get(tensor) is not None:
        return ints_of(ins[tensor])
    if ins.get(tensors):
        return [ints_of(t)[0] for t in ins[tensors]]
    return list(attrs[attr])


@kernel("fill_constant")
def fill_constant(xp, ins, attrs, want):
    if ins.get("ValueTensor") is not None:
        value = ins["ValueTensor"].reshape(-1)[0]
    else:
        text, dtype = attrs["str_value"], attrs["dtype"]
        exact_int = dtype.startswith(("int", "uint")) and text.lstrip("-").isdigit()
        value = int(text) if exact_int else float(text) if text else attrs["value"]
    return {"Out": xp.full(shape_arg(ins, attrs), value, dtype=attrs["dtype"])}


@kernel("fill_any_like")
def fill_any_like(xp, ins, attrs, want):
    x = ins["X"]
    dtype = attrs["dtype"]
    return {"Out": xp.full(x.shape, attrs["value"],
                           dtype=x.dtype if dtype in (None, -1) else dtype)}


@kernel("fill_zeros_like")
def fill_zeros_like(xp, ins, attrs, want):
    return {"Out": xp.zeros_like(ins["X"])}


@kernel("assign")
def assign(xp, ins, attrs, want):
    return {"Out": ins["X"].copy()}


# -- helpers ---------------------------------------------------------------------------------
def _check_ids(xp, ids, rows: int, what: str):
    """Ids outside [0, rows) are a user error, named here instead of surfacing as an
    IndexError or a silently wrapped negative index."""
    if ids.size == 0:
        return
    bad = (ids < 0) | (ids >= rows)
    if bool(bad.any()):
        first = int(ids[bad].reshape(-1)[0])
        raise InvalidArgumentError(
            f"{what} holds id {first}, outside the valid range [0, {rows - 1}]")


def _scatter_add(xp, target, index, values):
    """target[index] += values with repeated indices accumulated (unbuffered)."""
    if xp is np:
        np.add.at(target, index, values)
    else:  # cupy: the ufunc .at method is missing in older releases; scatter_add is not
        import cupyx

        cupyx.scatter_add(target, index, values)


def _check_trailing_one(a, what: str):
    """A [..., 1] id tensor whose last dim was unknown when the program was built."""
    if a.ndim == 0 or a.shape[-1] != 1:
        raise InvalidArgumentError(
            f"{what} must end in a dim of 1 (e.g. [N, 1]), got shape {list(a.shape)}")


def _xshape(xp, x):
    """XShape holds no data, only X's shape behind a leading 0: [0] + X.shape."""
    return xp.empty((0,) + x.shape, dtype=x.dtype)


# -- cast ------------------------------------------------------------------------------------
@kernel("cast")
def cast(xp, ins, attrs, want):
    return {"Out": ins["X"].astype(attrs["out_dtype"])}  # astype copies: no aliasing


# -- reshaping: outputs are copies, so no output ever aliases an input -------------------------
def _reshape_target(x, shape):
    target = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    known = math.prod(d for d in target if d != -1)
    if -1 in target:
        if known == 0 or x.size % known:
            raise InvalidArgumentError(
                f"cannot reshape an array of shape {list(x.shape)} ({x.size} elements) to "
                f"{shape}: the other dims take {known} elements per step")
        target[target.index(-1)] = x.size // known
    elif known != x.size:
        raise InvalidArgumentError(
            f"cannot reshape an array of shape {list(x.shape)} ({x.size} elements) to {shape} "
            f"({known} elements)")
    return target


@kernel("reshape2")
def reshape2(xp, ins, attrs, want):
    x = ins["X"]
    shape_in = ins.get("Shape")
    if shape_in is not None:
        shape = ints_of(shape_in)
    elif ins.get("ShapeTensor"):
        shape = [ints_of(t)[0] for t in ins["ShapeTensor"]]
    else:
        shape = attrs["shape"]
    res = {"Out": x.reshape(_reshape_target(x, shape)).copy()}
    if "XShape" in want:
        res["XShape"] = _xshape(xp, x)
    return res


@kernel("reshape2_grad", "flatten2_grad", "squeeze2_grad", "unsqueeze2_grad")
def reshape2_grad(xp, ins, attrs, want):
    return {"X@GRAD": ins["Out@GRAD"].reshape(ins["XShape"].shape[1:]).copy()}


@kernel("transpose2")
def transpose2(xp, ins, attrs, want):
    x = ins["X"]
    res = {"Out": x.transpose(attrs["axis"]).copy()}
    if "XShape" in want:
        res["XShape"] = _xshape(xp, x)
    return res


@kernel("transpose2_grad")
def transpose2_grad(xp, ins, attrs, want):
    inverse = [0] * len(attrs["axis"])
    for i, a in enumerate(attrs["axis"]):
        inverse[a] = i
    return {"X@GRAD": ins["Out@GRAD"].transpose(inverse).copy()}


@kernel("flatten2")
def flatten2(xp, ins, attrs, want):
    x, axis = ins["X"], attrs["axis"]
    res = {"Out": x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:])).copy()}
    if "XShape" in want:
        res["XShape"] = _xshape(xp, x)
    return res


@kernel("squeeze2")
def squeeze2(xp, ins, attrs, want):
    x, axes = ins["X"], attrs["axes"]
    # at run time only dims that really are 1 go, as in fluid
    if axes:
        drop = {a % x.ndim for a in axes if x.shape[a % x.ndim] == 1}
    else:
        drop = {i for i, d in enumerate(x.shape) if d == 1}
    res = {"Out": x.reshape([d for i, d in enumerate(x.shape) if i not in drop]).copy()}
    if "XShape" in want:
        res["XShape"] = _xshape(xp, x)
    return res


@kernel("unsqueeze2")
def unsqueeze2(xp, ins, attrs, want):
    x = ins["X"]
    shape = list(x.shape)
    for a in attrs["axes"]:
        shape.insert(a + len(shape) + 1 if a < 0 else a, 1)
    res = {"Out": x.reshape(shape).copy()}
    if "XShape" in want:
        res["XShape"] = _xshape(xp, x)
    return res


# -- joining and cutting ---------------------------------------------------------------------
def _concat_axis(ins, attrs) -> int:
    """The concat axis: AxisTensor's value when given (read at run time), else the attr."""
    if ins.get("AxisTensor") is not None:
        return ints_of(ins["AxisTensor"])[0]
    return attrs["axis"]


@kernel("concat")
def concat(xp, ins, attrs, want):
    return {"Out": xp.concatenate(ins["X"], axis=_concat_axis(ins, attrs))}


def _split_points(sizes):
    points, total = [], 0
    for s in sizes[:-1]:
        total += s
        points.append(total)
    return points


@kernel("concat_grad")
def concat_grad(xp, ins, attrs, want):
    xs, dout = ins["X"], ins["Out@GRAD"]
    axis = _concat_axis(ins, attrs) % dout.ndim
    pieces = xp.split(dout, _split_points([x.shape[axis] for x in xs]), axis=axis)
    return {"X@GRAD": [p.copy() for p in pieces]}


@kernel("split")
def split(xp, ins, attrs, want):
    x = ins["X"]
    axis = ints_of(ins["AxisTensor"])[0] if ins.get("AxisTensor") is not None else attrs["axis"]
    axis = axis % x.ndim
    dim, num, sections = x.shape[axis], attrs["num"], attrs["sections"]
    if ins.get("SectionsTensorList"):
        sections = [ints_of(t)[0] for t in ins["SectionsTensorList"]]
    if num > 0:
        if dim % num:
            raise InvalidArgumentError(
                f"split: axis {axis} has size {dim} at run time, not divisible by num={num}")
        sizes = [dim // num] * num
    else:
        known = sum(s for s in sections if s != -1)
        sizes = [dim - known if s == -1 else s for s in sections]
        if sum(sizes) != dim or min(sizes) < 0:
            raise InvalidArgumentError(
                f"split: sections={sections} do not fit axis {axis} of size {dim} at run time")
    return {"Out": [p.copy() for p in xp.split(x, _split_points(sizes), axis=axis)]}


def slice_bounds(ins, attrs, name: str) -> list[int]:
    """starts/ends (/strides) of a slicing op: a tensor, a list of [1] tensors or the attr."""
    key = name.capitalize()
    if ins.get(f"{key}Tensor") is not None:
        return ints_of(ins[f"{key}Tensor"])
    if ins.get(f"{key}TensorList"):
        return [ints_of(t)[0] for t in ins[f"{key}TensorList"]]
    return list(attrs[name])


def _slices(x, attrs, ins=None):
    index = [slice(None)] * x.ndim
    ins = ins or {}
    for a, s, e in zip(attrs["axes"], slice_bounds(ins, attrs, "starts"),
                       slice_bounds(ins, attrs, "ends")):
        index[a] = slice(s, e)  # python slicing clamps out-of-range bounds as fluid does
    return tuple(index)


@kernel("slice")
def slice_(xp, ins, attrs, want):
    x = ins["Input"]
    out = x[_slices(x, attrs, ins)]
    decrease = attrs["decrease_axis"]
    if decrease:
        shape = [d for i, d in enumerate(out.shape) if i not in decrease] or [1]
        out = out.reshape(shape)
    return {"Out": out.copy()}


@kernel("slice_grad")
def slice_grad(xp, ins, attrs, want):
    x, dout = ins["Input"], ins["Out@GRAD"]
    index = _slices(x, attrs, ins)
    dx = xp.zeros(x.shape, dtype=dout.dtype)
    dx[index] = dout.reshape(dx[index].shape)  # undoes decrease_axis
    return {"Input@GRAD": dx}


# -- indexing --------------------------------------------------------------------------------
@kernel("gather")
def gather(xp, ins, attrs, want):
    x, index = ins["X"], ins["Index"]
    if index.ndim == 2:
        _check_trailing_one(index, "gather: a 2-D Index")
    index = index.reshape(-1)
    _check_ids(xp, index, x.shape[0], "gather: Index")
    return {"Out": xp.take(x, index, axis=0)}


@kernel("gather_grad")
def gather_grad(xp, ins, attrs, want):
    x, index, dout = ins["X"], ins["Index"].reshape(-1), ins["Out@GRAD"]
    dx = xp.zeros(x.shape, dtype=dout.dtype)
    if attrs.get("overwrite", True) and index.size:
        # fluid's overwrite mode (its default): a repeated index takes the gradient of its
        # last occurrence only, not the sum; picked explicitly so cupy agrees with numpy
        rev = index[::-1]
        rows, first = xp.unique(rev, return_index=True)
        dx[rows] = dout[index.size - 1 - first]
    else:
        _scatter_add(xp, dx, index, dout)  # accumulate: a repeated index sums its rows
    return {"X@GRAD": dx}


@kernel("one_hot")
def one_hot(xp, ins, attrs, want):
    x, depth = ins["X"], attrs["depth"]
    if ins.get("depth_tensor") is not None:
        depth = ints_of(ins["depth_tensor"])[0]
        if depth <= 0:
            raise InvalidArgumentError(f"one_hot: depth_tensor holds {depth}: expected > 0")
    _check_trailing_one(x, "one_hot: X")
    ids = x.reshape(-1)
    rows = xp.arange(ids.size)
    if attrs["allow_out_of_range"]:
        keep = (ids >= 0) & (ids < depth)  # out-of-range ids give all-zero rows
        rows, ids = rows[keep], ids[keep]
    else:
        _check_ids(xp, ids, depth, "one_hot: X (set allow_out_of_range to give zero rows)")
    out = xp.zeros((x.size, depth), dtype=attrs["dtype"])
    out[rows, ids] = 1
    return {"Out": out.reshape(x.shape[:-1] + (depth,))}


def _lookup(xp, ins, attrs, lead_shape):
    w, ids = ins["W"], ins["Ids"].reshape(-1)
    pad = attrs["padding_idx"]
    _check_ids(xp, ids, w.shape[0], "lookup_table: Ids")
    out = xp.take(w, ids, axis=0)
    if pad != -1:
        out[ids == pad] = 0
    return {"Out": out.reshape(tuple(lead_shape) + (w.shape[1],))}


def _lookup_grad(xp, ins, attrs):
    """The table's gradient: dense, or with is_sparse the looked-up rows only (SelectedRows,
    one row per id, repeats kept, as fluid's)."""
    w, ids, dout = ins["W"], ins["Ids"].reshape(-1), ins["Out@GRAD"]
    rows = dout.reshape(ids.size, w.shape[1])
    pad = attrs["padding_idx"]
    if pad != -1:
        keep = ids != pad  # the padding row gets no gradient
        ids, rows = ids[keep], rows[keep]
    if attrs["is_sparse"]:
        return {"W@GRAD": SelectedRows(ids.astype("int64"), rows.astype(dout.dtype, copy=True),
                                       w.shape[0])}
    dw = xp.zeros(w.shape, dtype=dout.dtype)
    add_rows(xp, dw, ids, rows)  # sorted and summed per row: faster than add.at
    return {"W@GRAD": dw}


@kernel("lookup_table")
def lookup_table(xp, ins, attrs, want):
    _check_trailing_one(ins["Ids"], "lookup_table: Ids")
    return _lookup(xp, ins, attrs, ins["Ids"].shape[:-1])


@kernel("lookup_table_v2")
def lookup_table_v2(xp, ins, attrs, want):
    return _lookup(xp, ins, attrs, ins["Ids"].shape)


@kernel("lookup_table_grad", "lookup_table_v2_grad")
def lookup_table_grad(xp, ins, attrs, want):
    return _lookup_grad(xp, ins, attrs)
