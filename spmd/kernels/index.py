"""Kernels: picking, sorting, scattering and finding elements by index."""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .registry import kernel
from .tensor import _check_ids, _scatter_add
from .xxhash import xxh64


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


# -- arg reductions and sorting --------------------------------------------------------------
def _arg(xp, fn, ins, attrs):
    x, axis = ins["X"], attrs["axis"]
    out = fn(x, axis=axis)
    if attrs["keepdims"]:
        out = xp.expand_dims(out, axis)
    dtype = "int32" if attrs["dtype"] == 2 else "int64"  # VarType INT32 = 2, default int64
    return {"Out": out.reshape(out.shape or (1,)).astype(dtype)}


@kernel("arg_max")
def arg_max(xp, ins, attrs, want):
    return _arg(xp, xp.argmax, ins, attrs)


@kernel("arg_min")
def arg_min(xp, ins, attrs, want):
    return _arg(xp, xp.argmin, ins, attrs)


# -- fluid 1.8's top_k order among equal values ------------------------------------------------
def _sift(a, hole, n, value):
    """libstdc++'s heap sift over a[:n] (a max-heap under "first value smaller")."""
    top = child = hole
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if a[child][0] > a[child - 1][0]:
            child -= 1
        a[hole], hole = a[child], child
    if n % 2 == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        a[hole], hole = a[child - 1], child - 1
    parent = (hole - 1) // 2
    while hole > top and a[parent][0] > value[0]:
        a[hole], hole, parent = a[parent], parent, (parent - 1) // 2
    a[hole] = value


def heap_top_k(row, k: int) -> list[int]:
    """The indices of the k largest of `row`, in the order fluid 1.8's CPU top_k gives them:
    std::partial_sort by value alone (a heap select, then a heap sort), so equal values come
    out in its heap's order, not by index. Plain Python: used only for rows with such ties."""
    a = [(float(v), i) for i, v in enumerate(row)]
    for parent in range((k - 2) // 2, -1, -1):
        _sift(a, parent, k, a[parent])
    for i in range(k, len(a)):
        if a[i][0] > a[0][0]:
            value, a[i] = a[i], a[0]
            _sift(a, 0, k, value)
    for last in range(k - 1, 0, -1):
        value, a[last] = a[last], a[0]
        _sift(a, 0, last, value)
    return [i for _, i in a[:k]]


@kernel("argsort")
def argsort(xp, ins, attrs, want):
    x, axis = ins["X"], attrs["axis"]
    # stable, and descending by sorting the negation, so ties keep their input order
    idx = xp.argsort(-x if attrs["descending"] else x, axis=axis, kind="stable")
    return {"Out": xp.take_along_axis(x, idx, axis=axis), "Indices": idx.astype(np.int64)}


@kernel("argsort_grad")
def argsort_grad(xp, ins, attrs, want):
    idx, dout = ins["Indices"], ins["Out@GRAD"]
    inverse = xp.argsort(idx, axis=attrs["axis"])  # where each input element went
    return {"X@GRAD": xp.take_along_axis(dout, inverse, axis=attrs["axis"])}


# -- gathering -------------------------------------------------------------------------------
def _nd_index(xp, x, index, what):
    k = index.shape[-1]
    for j in range(k):
        _check_ids(xp, index[..., j], x.shape[j], f"{what}: Index[..., {j}]")
    return tuple(index[..., j] for j in range(k))


@kernel("gather_nd")
def gather_nd(xp, ins, attrs, want):
    x, index = ins["X"], ins["Index"]
    if index.shape[-1] == 0:  # an empty index row selects the whole of X for every row
        return {"Out": xp.broadcast_to(x, index.shape[:-1] + x.shape).copy()}
    return {"Out": x[_nd_index(xp, x, index, "gather_nd")].copy()}


@kernel("gather_nd_grad")
def gather_nd_grad(xp, ins, attrs, want):
    x, index, dout = ins["X"], ins["Index"], ins["Out@GRAD"]
    dx = xp.zeros(x.shape, dtype=dout.dtype)
    if index.shape[-1] == 0:
        dx += dout.reshape((-1,) + x.shape).sum(axis=0)
    else:
        _scatter_add(xp, dx, tuple(index[..., j] for j in range(index.shape[-1])), dout)
    return {"X@GRAD": dx}


@kernel("index_sample")
def index_sample(xp, ins, attrs, want):
    x, index = ins["X"], ins["Index"]
    _check_ids(xp, index, x.shape[1], "index_sample: Index")
    return {"Out": xp.take_along_axis(x, index.astype(np.int64), axis=1)}


@kernel("index_sample_grad")
def index_sample_grad(xp, ins, attrs, want):
    x, index, dout = ins["X"], ins["Index"].astype(np.int64), ins["Out@GRAD"]
    dx = xp.zeros(x.shape, dtype=dout.dtype)
    rows = xp.broadcast_to(xp.arange(x.shape[0])[:, None], index.shape)
    _scatter_add(xp, dx, (rows, index), dout)
    return {"X@GRAD": dx}


@kernel("index_select")
def index_select(xp, ins, attrs, want):
    x, index = ins["X"], ins["Index"].reshape(-1)
    dim = attrs["dim"] % x.ndim
    _check_ids(xp, index, x.shape[dim], "index_select: Index")
    return {"Out": xp.take(x, index, axis=dim)}


@kernel("index_select_grad")
def index_select_grad(xp, ins, attrs, want):
    x, index, dout = ins["X"], ins["Index"].reshape(-1), ins["Out@GRAD"]
    dim = attrs["dim"] % x.ndim
    acc = xp.zeros((x.shape[dim],) + tuple(d for i, d in enumerate(x.shape) if i != dim),
                   dtype=dout.dtype)
    _scatter_add(xp, acc, index, xp.moveaxis(dout, dim, 0))
    return {"X@GRAD": xp.ascontiguousarray(xp.moveaxis(acc, 0, dim))}


@kernel("multiplex")
def multiplex(xp, ins, attrs, want):
    xs, ids = ins["X"], ins["Ids"].reshape(-1)
    _check_ids(xp, ids, len(xs), "multiplex: Ids")
    stacked = xp.stack(xs)
    return {"Out": stacked[ids, xp.arange(ids.size)]}


@kernel("multiplex_grad")
def multiplex_grad(xp, ins, attrs, want):
    ids, dout = ins["Ids"].reshape(-1), ins["Out@GRAD"]
    mask_shape = (-1,) + (1,) * (dout.ndim - 1)
    return {"X@GRAD": [dout * (ids == k).reshape(mask_shape).astype(dout.dtype)
                       for k in range(len(ins["X"]))]}


# -- scattering ------------------------------------------------------------------------------
@kernel("scatter")
def scatter(xp, ins, attrs, want):
    x, ids, upd = ins["X"], ins["Ids"].reshape(-1), ins["Updates"]
    _check_ids(xp, ids, x.shape[0], "scatter: Ids")
    out = x.copy()
    if attrs["overwrite"]:
        out[ids] = upd  # a repeated id keeps its last update, as fluid's kernel does
    else:
        out[ids] = 0  # repeated ids add up, starting from zero (fluid's accumulate mode)
        _scatter_add(xp, out, ids, upd)
    return {"Out": out}


@kernel("scatter_grad")
def scatter_grad(xp, ins, attrs, want):
    ids, dout = ins["Ids"].reshape(-1), ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in want:
        dx = dout.copy()
        dx[ids] = 0  # overwritten rows take no gradient back to X
        res["X@GRAD"] = dx
    if "Updates@GRAD" in want:
        res["Updates@GRAD"] = xp.take(dout, ids, axis=0)
    return res


@kernel("scatter_nd_add")
def scatter_nd_add(xp, ins, attrs, want):
    x, index, upd = ins["X"], ins["Index"], ins["Updates"]
    out = x.copy()
    if index.shape[-1] == 0:
        out += upd.reshape((-1,) + x.shape).sum(axis=0)
    else:
        _scatter_add(xp, out, _nd_index(xp, x, index, "scatter_nd_add"), upd)
    return {"Out": out}


@kernel("scatter_nd_add_grad")
def scatter_nd_add_grad(xp, ins, attrs, want):
    index, dout = ins["Index"], ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = dout.copy()
    if "Updates@GRAD" in want:
        if index.shape[-1] == 0:
            upd = xp.broadcast_to(dout, index.shape[:-1] + dout.shape).copy()
        else:
            upd = dout[tuple(index[..., j] for j in range(index.shape[-1]))]
        res["Updates@GRAD"] = upd
    return res


# -- finding ---------------------------------------------------------------------------------
@kernel("where_index")
def where_index(xp, ins, attrs, want):
    return {"Out": xp.argwhere(ins["Condition"]).astype(np.int64)}


@kernel("where")
def where(xp, ins, attrs, want):
    cond, x, y = ins["Condition"], ins["X"], ins["Y"]
    if not cond.shape == x.shape == y.shape:  # unknown (-1) dims fed with different sizes
        raise InvalidArgumentError(
            f"where: Condition {list(cond.shape)}, X {list(x.shape)} and Y {list(y.shape)} "
            f"must have the same shape (paddle.where broadcasts them first)")
    return {"Out": xp.where(cond, x, y)}


@kernel("where_grad")
def where_grad(xp, ins, attrs, want):
    cond, dout = ins["Condition"], ins["Out@GRAD"]
    zero = xp.zeros((), dtype=dout.dtype)
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = xp.where(cond, dout, zero)
    if "Y@GRAD" in want:
        res["Y@GRAD"] = xp.where(cond, zero, dout)
    return res


def _unique(x):
    """Unique values in order of first appearance (fluid's order), the index of each input
    element among them and how often each occurs."""
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return values[order], rank[inverse.reshape(-1)], counts[order]


@kernel("unique")
def unique(xp, ins, attrs, want):
    out, index, _ = _unique(_host(ins["X"]))
    return {"Out": xp.asarray(out), "Index": xp.asarray(index.astype(attrs["dtype"]))}


@kernel("unique_with_counts")
def unique_with_counts(xp, ins, attrs, want):
    out, index, count = _unique(_host(ins["X"]))
    return {"Out": xp.asarray(out), "Index": xp.asarray(index.astype(attrs["dtype"])),
            "Count": xp.asarray(count.astype(attrs["dtype"]))}


@kernel("shard_index")
def shard_index(xp, ins, attrs, want):
    x = ins["X"]
    num, nshards, sid = attrs["index_num"], attrs["nshards"], attrs["shard_id"]
    if x.size and bool(((x < 0) | (x >= num)).any()):
        raise InvalidArgumentError(
            f"shard_index: ids must be in [0, index_num={num}), got values outside")
    size = (num + nshards - 1) // nshards
    mine = (x // size) == sid
    return {"Out": xp.where(mine, x - sid * size, attrs["ignore_value"]).astype(x.dtype)}


@kernel("hash")
def hash_(xp, ins, attrs, want):
    """Each row of X (its last dim) hashed num_hash times with XXH64 (seeds 0..num_hash-1),
    modulo mod_by: the bytes hashed are the row's values as stored."""
    x = np.ascontiguousarray(_host(ins["X"]))
    rows = x.reshape(-1, x.shape[-1])
    k, mod = attrs["num_hash"], attrs["mod_by"]
    out = np.empty((rows.shape[0], k, 1), dtype=np.int64)
    for i, row in enumerate(rows):
        data = row.tobytes()
        for s in range(k):
            out[i, s, 0] = xxh64(data, s) % mod
    return {"Out": xp.asarray(out.reshape(x.shape[:-1] + (k, 1)))}


# -- beam search and attention masks ---------------------------------------------------------
@kernel("gather_tree")
def gather_tree(xp, ins, attrs, want):
    """Backtrace beam search: walk each final beam's parents from the last step to the first,
    collecting the id chosen at each step. Ids and Parents are [max_time, batch, beam]."""
    ids, parents = ins["Ids"], ins["Parents"]
    beam = ids.shape[2]
    if parents.size and bool(((parents < 0) | (parents >= beam)).any()):
        raise InvalidArgumentError(
            f"gather_tree: Parents must hold beam indices in [0, {beam - 1}] (beam_size "
            f"{beam}), got values outside")
    out = xp.empty_like(ids)
    if ids.shape[0] == 0:
        return {"Out": out}
    out[-1] = ids[-1]
    parent = parents[-1].astype(np.int64)
    for step in range(ids.shape[0] - 2, -1, -1):
        out[step] = xp.take_along_axis(ids[step], parent, axis=1)
        parent = xp.take_along_axis(parents[step], parent, axis=1).astype(np.int64)
    return {"Out": out}


def _focus_mask(t):
    """The greedy focus of a 2-D matrix: take the largest value, then the largest one in a
    row and a column both still free, and so on, min(rows, cols) times."""
    rows, cols = t.shape
    mask = np.zeros(t.shape, dtype=bool)
    row_free, col_free = np.ones(rows, bool), np.ones(cols, bool)
    picked = 0
    for flat in np.argsort(-t, axis=None, kind="stable"):
        r, c = divmod(int(flat), cols)
        if row_free[r] and col_free[c]:
            mask[r, c] = True
            row_free[r] = col_free[c] = False
            picked += 1
            if picked == min(rows, cols):
                break
    return mask


@kernel("similarity_focus")
def similarity_focus(xp, ins, attrs, want):
    """For each sample, the OR over `indexes` of the focus of X's slice at that index along
    `axis`, broadcast back along `axis`."""
    x = _host(ins["X"])
    axis, size = attrs["axis"], x.shape[attrs["axis"]]
    bad = [i for i in attrs["indexes"] if not 0 <= i < size]
    if bad:
        raise InvalidArgumentError(
            f"similarity_focus: indexes {bad} are outside X's dim {axis} of size {size}")
    out = np.zeros(x.shape, dtype=x.dtype)
    for b in range(x.shape[0]):
        mask = np.zeros(np.delete(x.shape[1:], axis - 1), dtype=bool)
        for i in attrs["indexes"]:
            mask |= _focus_mask(np.take(x[b], i, axis=axis - 1))
        out[b] = np.broadcast_to(np.expand_dims(mask, axis - 1), x.shape[1:])
    return {"Out": xp.asarray(out)}
