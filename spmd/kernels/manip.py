"""Kernels: cropping, padding, tiling, flipping, stacking, strided slicing, triangles, cvm."""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..ops.manip import empty_strided_message, strided_axis
from .registry import kernel
from .tensor import _scatter_add, ints_of, slice_bounds


# -- cropping --------------------------------------------------------------------------------
def _crop_box(ins, attrs, x_shape, shape_slot: str, list_slot: str | None):
    """(offsets, sizes) of a crop: tensors win over attributes. crop_tensor: -1 in the size
    keeps the rest of X's dim after the offset. crop (list_slot None): -1 may stand only in
    dim 0 and means X's dim 0, the batch size, whatever the offset (fluid 1.8's rule)."""
    if ins.get("Offsets") is not None:
        offsets = ints_of(ins["Offsets"])
    elif ins.get("OffsetsTensor"):
        offsets = [ints_of(t)[0] for t in ins["OffsetsTensor"]]
    else:
        offsets = list(attrs["offsets"]) or [0] * len(x_shape)
    if ins.get(shape_slot) is not None:
        v = ins[shape_slot]
        sizes = list(v.shape) if shape_slot == "Y" else ints_of(v)
    elif list_slot and ins.get(list_slot):
        sizes = [ints_of(t)[0] for t in ins[list_slot]]
    else:
        sizes = list(attrs["shape"])
    if list_slot is None:
        sizes = _crop_batch_size(sizes, x_shape)
    else:
        sizes = [d - o if s == -1 else s for s, d, o in zip(sizes, x_shape, offsets)]
    for i, (o, s, d) in enumerate(zip(offsets, sizes, x_shape)):
        if o < 0 or s <= 0 or o + s > d:
            raise InvalidArgumentError(
                f"crop: dim {i} takes [{o}, {o + s}) of a dim of size {d}: offsets {offsets} "
                f"and shape {sizes} must fit inside X {list(x_shape)}")
    return tuple(slice(o, o + s) for o, s in zip(offsets, sizes))


def _crop_batch_size(sizes, x_shape):
    bad = [i for i, s in enumerate(sizes) if s == -1 and i > 0]
    if bad:
        raise InvalidArgumentError(
            f"crop: shape {sizes} holds -1 in dim {bad[0]}; crop takes -1 only in dim 0 (the "
            f"batch size of X {list(x_shape)}): give the size, or use crop_tensor, whose -1 "
            f"keeps the rest of a dim")
    return [x_shape[0] if i == 0 and s == -1 else s for i, s in enumerate(sizes)]


@kernel("crop")
def crop(xp, ins, attrs, want):
    x = ins["X"]
    return {"Out": x[_crop_box(ins, attrs, x.shape, "Y", None)].copy()}


@kernel("crop_tensor")
def crop_tensor(xp, ins, attrs, want):
    x = ins["X"]
    return {"Out": x[_crop_box(ins, attrs, x.shape, "Shape", "ShapeTensor")].copy()}


def _crop_grad(xp, ins, attrs, shape_slot, list_slot):
    x, dout = ins["X"], ins["Out@GRAD"]
    dx = xp.zeros(x.shape, dtype=dout.dtype)
    dx[_crop_box(ins, attrs, x.shape, shape_slot, list_slot)] = dout
    return {"X@GRAD": dx}


@kernel("crop_grad")
def crop_grad(xp, ins, attrs, want):
    return _crop_grad(xp, ins, attrs, "Y", None)


@kernel("crop_tensor_grad")
def crop_tensor_grad(xp, ins, attrs, want):
    return _crop_grad(xp, ins, attrs, "Shape", "ShapeTensor")


# -- tiling ----------------------------------------------------------------------------------
def _expand_times(ins, attrs):
    if ins.get("ExpandTimes") is not None:
        return ints_of(ins["ExpandTimes"])
    if ins.get("expand_times_tensor"):
        return [ints_of(t)[0] for t in ins["expand_times_tensor"]]
    return list(attrs["expand_times"])


def _untile(xp, dout, x_shape, times):
    """The gradient of tiling: dOut viewed as (times, size) pairs, summed over the times."""
    pairs = [v for t, d in zip(times, x_shape) for v in (t, d)]
    return dout.reshape(pairs).sum(axis=tuple(range(0, len(pairs), 2)))


@kernel("expand")
def expand(xp, ins, attrs, want):
    return {"Out": xp.tile(ins["X"], _expand_times(ins, attrs))}


@kernel("expand_grad")
def expand_grad(xp, ins, attrs, want):
    x = ins["X"]
    return {"X@GRAD": _untile(xp, ins["Out@GRAD"], x.shape, _expand_times(ins, attrs))}


def _as_times(x, target):
    if any(t % d for t, d in zip(target.shape, x.shape)):
        raise InvalidArgumentError(
            f"expand_as: target shape {list(target.shape)} is not a multiple of X's "
            f"{list(x.shape)} in every dim")
    return [t // d for t, d in zip(target.shape, x.shape)]


@kernel("expand_as")
def expand_as(xp, ins, attrs, want):
    return {"Out": xp.tile(ins["X"], _as_times(ins["X"], ins["target_tensor"]))}


@kernel("expand_as_grad")
def expand_as_grad(xp, ins, attrs, want):
    x = ins["X"]
    return {"X@GRAD": _untile(xp, ins["Out@GRAD"], x.shape, _as_times(x, ins["target_tensor"]))}


# -- flipping and rolling --------------------------------------------------------------------
@kernel("flip")
def flip(xp, ins, attrs, want):
    return {"Out": xp.flip(ins["X"], axis=tuple(attrs["dims"])).copy()}


@kernel("reverse")
def reverse(xp, ins, attrs, want):
    return {"Out": xp.flip(ins["X"], axis=tuple(attrs["axis"])).copy()}


@kernel("roll")
def roll(xp, ins, attrs, want):
    dims = attrs["dims"] or None
    return {"Out": xp.roll(ins["X"], attrs["shifts"], axis=dims)}


@kernel("roll_grad")
def roll_grad(xp, ins, attrs, want):
    dims = attrs["dims"] or None
    return {"X@GRAD": xp.roll(ins["Out@GRAD"], [-s for s in attrs["shifts"]], axis=dims)}


# -- padding ---------------------------------------------------------------------------------
def _pad_pairs(attrs):
    p = attrs["paddings"]
    return [(p[2 * i], p[2 * i + 1]) for i in range(len(p) // 2)]


@kernel("pad")
def pad(xp, ins, attrs, want):
    return {"Out": xp.pad(ins["X"], _pad_pairs(attrs), mode="constant",
                          constant_values=attrs["pad_value"])}


@kernel("pad_grad")
def pad_grad(xp, ins, attrs, want):
    dout = ins["Out@GRAD"]
    box = tuple(slice(b, d - a) for (b, a), d in zip(_pad_pairs(attrs), dout.shape))
    return {"X@GRAD": dout[box].copy()}


def _pad2d_setup(ins, attrs, x_shape):
    p = ints_of(ins["Paddings"]) if ins.get("Paddings") is not None else list(attrs["paddings"])
    h, w = (2, 3) if attrs["data_format"] == "NCHW" else (1, 2)
    mode = attrs["mode"]
    if mode == "reflect" and (max(p[0], p[1]) >= x_shape[h] or max(p[2], p[3]) >= x_shape[w]):
        raise InvalidArgumentError(
            f"pad2d: reflect padding {p} must be smaller than the padded dims "
            f"(H={x_shape[h]}, W={x_shape[w]})")
    pairs = [(0, 0)] * 4
    pairs[h], pairs[w] = (p[0], p[1]), (p[2], p[3])
    return pairs, h, w


@kernel("pad2d")
def pad2d(xp, ins, attrs, want):
    x = ins["X"]
    pairs, _, _ = _pad2d_setup(ins, attrs, x.shape)
    if attrs["mode"] == "constant":
        return {"Out": xp.pad(x, pairs, mode="constant", constant_values=attrs["pad_value"])}
    return {"Out": xp.pad(x, pairs, mode=attrs["mode"])}


def _source_index(n, before, after, mode):
    """For each padded position along one axis, the input position it copies."""
    return np.pad(np.arange(n), (before, after), mode=mode)


@kernel("pad2d_grad")
def pad2d_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    pairs, h, w = _pad2d_setup(ins, attrs, x.shape)
    if attrs["mode"] == "constant":
        box = tuple(slice(b, d - a) for (b, a), d in zip(pairs, dout.shape))
        return {"X@GRAD": dout[box].copy()}
    g = dout
    for axis in (h, w):
        src = xp.asarray(_source_index(x.shape[axis], *pairs[axis], attrs["mode"]))
        moved = xp.moveaxis(g, axis, 0)
        acc = xp.zeros((x.shape[axis],) + moved.shape[1:], dtype=dout.dtype)
        _scatter_add(xp, acc, src, moved)  # a copied edge collects every gradient it fed
        g = xp.moveaxis(acc, 0, axis)
    return {"X@GRAD": xp.ascontiguousarray(g)}


@kernel("pad_constant_like")
def pad_constant_like(xp, ins, attrs, want):
    x, y = ins["X"], ins["Y"]
    pairs = [(0, a - b) for a, b in zip(x.shape, y.shape)]
    return {"Out": xp.pad(y, pairs, mode="constant", constant_values=attrs["pad_value"])}


@kernel("pad_constant_like_grad")
def pad_constant_like_grad(xp, ins, attrs, want):
    y, dout = ins["Y"], ins["Out@GRAD"]
    return {"Y@GRAD": dout[tuple(slice(0, d) for d in y.shape)].copy()}


# -- stacking --------------------------------------------------------------------------------
@kernel("stack")
def stack(xp, ins, attrs, want):
    return {"Y": xp.stack(ins["X"], axis=attrs["axis"])}


@kernel("stack_grad")
def stack_grad(xp, ins, attrs, want):
    dy = ins["Y@GRAD"]
    axis = attrs["axis"] % dy.ndim
    return {"X@GRAD": [xp.take(dy, i, axis=axis) for i in range(dy.shape[axis])]}


@kernel("unstack")
def unstack(xp, ins, attrs, want):
    x = ins["X"]
    axis = attrs["axis"] % x.ndim
    return {"Y": [xp.take(x, i, axis=axis) for i in range(x.shape[axis])]}


@kernel("unstack_grad")
def unstack_grad(xp, ins, attrs, want):
    return {"X@GRAD": xp.stack(ins["Y@GRAD"], axis=attrs["axis"] % ins["X"].ndim)}


@kernel("meshgrid")
def meshgrid(xp, ins, attrs, want):
    return {"Out": [g.copy() for g in xp.meshgrid(*ins["X"], indexing="ij")]}


@kernel("meshgrid_grad")
def meshgrid_grad(xp, ins, attrs, want):
    douts = ins["Out@GRAD"]
    rank = len(douts)
    return {"X@GRAD": [d.sum(axis=tuple(j for j in range(rank) if j != i))
                       for i, d in enumerate(douts)]}


# -- slicing with strides --------------------------------------------------------------------
def _strided_index(ins, attrs, shape):
    ndim = len(shape)
    index = [slice(None)] * ndim
    starts, ends = slice_bounds(ins, attrs, "starts"), slice_bounds(ins, attrs, "ends")
    strides = slice_bounds(ins, attrs, "strides")
    for a, s, e, st in zip(attrs["axes"], starts, ends, strides):
        if st == 0:
            raise InvalidArgumentError(f"strided_slice: strides must not be 0, got {strides}")
        sl = strided_axis(s, e, st)
        if not len(range(*sl.indices(shape[a % ndim]))):
            raise InvalidArgumentError(empty_strided_message(a, shape[a % ndim], sl))
        index[a % ndim] = sl
    return tuple(index)


@kernel("strided_slice")
def strided_slice(xp, ins, attrs, want):
    x = ins["Input"]
    out = x[_strided_index(ins, attrs, x.shape)]
    dec = attrs["decrease_axis"]
    if dec:
        out = out.reshape([d for i, d in enumerate(out.shape) if i not in dec] or [1])
    return {"Out": out.copy()}


@kernel("strided_slice_grad")
def strided_slice_grad(xp, ins, attrs, want):
    x, dout = ins["Input"], ins["Out@GRAD"]
    index = _strided_index(ins, attrs, x.shape)
    dx = xp.zeros(x.shape, dtype=dout.dtype)
    dx[index] = dout.reshape(dx[index].shape)  # undoes decrease_axis
    return {"Input@GRAD": dx}


# -- diagonals, triangles, shapes ------------------------------------------------------------
@kernel("diag_embed")
def diag_embed(xp, ins, attrs, want):
    x, off = ins["Input"], attrs["offset"]
    n = x.shape[-1]
    m = n + abs(off)
    base = xp.zeros(x.shape[:-1] + (m, m), dtype=x.dtype)
    i = xp.arange(n)
    rows, cols = (i, i + off) if off >= 0 else (i - off, i)
    base[..., rows, cols] = x
    rank = x.ndim + 1
    d1, d2 = attrs["dim1"] % rank, attrs["dim2"] % rank
    return {"Out": xp.ascontiguousarray(xp.moveaxis(base, [-2, -1], [d1, d2]))}


@kernel("tril_triu")
def tril_triu(xp, ins, attrs, want):
    fn = xp.tril if attrs["lower"] else xp.triu
    return {"Out": fn(ins["X"], attrs["diagonal"])}


@kernel("tril_triu_grad")
def tril_triu_grad(xp, ins, attrs, want):
    fn = xp.tril if attrs["lower"] else xp.triu
    return {"X@GRAD": fn(ins["Out@GRAD"], attrs["diagonal"])}


@kernel("shape")
def shape(xp, ins, attrs, want):
    return {"Out": xp.asarray(ins["Input"].shape, dtype=np.int32)}


@kernel("size")
def size(xp, ins, attrs, want):
    return {"Out": xp.asarray([ins["Input"].size], dtype=np.int64)}


# -- CTR features ----------------------------------------------------------------------------
@kernel("cvm")
def cvm(xp, ins, attrs, want):
    """use_cvm: Y = X with column 0 -> log(show + 1) and column 1 -> log(click + 1) -
    log(show + 1); otherwise Y = X without its first two columns."""
    x = ins["X"]
    if not attrs["use_cvm"]:
        return {"Y": x[:, 2:].copy()}
    y = x.copy()
    log_show = xp.log(x[:, 0] + 1)
    y[:, 0] = log_show
    y[:, 1] = xp.log(x[:, 1] + 1) - log_show
    return {"Y": y}


@kernel("cvm_grad")
def cvm_grad(xp, ins, attrs, want):
    """fluid's rule, not the derivative: X@GRAD carries Y@GRAD in the embedding columns and
    the row's show and click (from CVM) in the first two."""
    x, cvm_, dy = ins["X"], ins["CVM"], ins["Y@GRAD"]
    if cvm_.shape[0] != x.shape[0]:
        raise InvalidArgumentError(
            f"cvm_grad: CVM has {cvm_.shape[0]} rows but X has {x.shape[0]}: give one "
            f"(show, click) row per row of X")
    dx = xp.empty(x.shape, dtype=dy.dtype)
    dx[:, 2:] = dy[:, 2:] if attrs["use_cvm"] else dy
    dx[:, :2] = cvm_[:, :2]
    return {"X@GRAD": dx}
