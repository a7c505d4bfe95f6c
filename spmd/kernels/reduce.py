"""Kernels: reductions (reduce_sum/mean/max/min/prod/all/any, mean, squared_l2_norm).

Reducing every dim without keep_dim gives shape [1], as fluid 1.8 (never a 0-d array). Every
reduction keeps X's dtype; an integer reduce_mean truncates toward zero, as fluid's does.

>>> # reduce_min over dim [1] of [[1, 2], [0, 5]] -> [1, 0]
"""
from __future__ import annotations

from .registry import kernel
from .sparse_update import SparseValues

# -- reductions --------------------------------------------------------------------------------

def _reduce_axes(x, attrs):
    """The axes a reduce op folds; None for all of them."""
    dims = attrs["dim"]
    if attrs["reduce_all"] or not dims:
        return None
    return tuple(d + x.ndim if d < 0 else d for d in dims)


def _reduced(out):
    # reducing everything without keep_dim gives a scalar; fluid 1.8 gives shape [1]
    return out.reshape(1) if out.ndim == 0 else out


def _kept_shape(x, axes):
    """Out's shape as if keep_dim were set, to broadcast gradients back over X."""
    return tuple(1 if axes is None or i in axes else d for i, d in enumerate(x.shape))


@kernel("reduce_sum")
def reduce_sum(xp, ins, attrs, want):
    x = ins["X"]
    # dtype=x.dtype: numpy would widen int32 sums to int64
    out = x.sum(axis=_reduce_axes(x, attrs), dtype=x.dtype, keepdims=attrs["keep_dim"])
    return {"Out": _reduced(out)}


@kernel("reduce_sum_grad")
def reduce_sum_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    dk = dout.reshape(_kept_shape(x, _reduce_axes(x, attrs)))
    return {"X@GRAD": xp.broadcast_to(dk, x.shape).copy()}  # a real (contiguous) buffer


@kernel("reduce_mean")
def reduce_mean(xp, ins, attrs, want):
    x = ins["X"]
    axes = _reduce_axes(x, attrs)
    if x.dtype.kind in "iu":  # fluid 1.8: the integer sum over the count, truncated to zero
        total = x.sum(axis=axes, dtype=x.dtype, keepdims=attrs["keep_dim"])
        count = max(x.size // max(total.size, 1), 1)
        q = xp.abs(total) // count
        return {"Out": _reduced(xp.where(total < 0, -q, q).astype(x.dtype))}
    if not x.size:  # nan, as fluid (0 / 0), without numpy's "mean of empty slice" warning
        return {"Out": _reduced(_filled_out(xp, x, attrs, float("nan")))}
    return {"Out": _reduced(x.mean(axis=axes, keepdims=attrs["keep_dim"]))}


@kernel("reduce_mean_grad")
def reduce_mean_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    dk = dout.reshape(_kept_shape(x, _reduce_axes(x, attrs)))
    count = x.size // dk.size if dk.size else 1
    return {"X@GRAD": xp.broadcast_to(dk * (1.0 / count), x.shape).copy()}


def _extreme(xp, x, attrs, name: str, sign: int):
    """max (sign 1) or min (sign -1) over the reduced axes. Over no elements it is the
    reduction's identity, -inf / +inf (an integer dtype's lowest / highest), as fluid 1.8
    gives, where numpy would raise."""
    if x.size:
        return getattr(x, name)(axis=_reduce_axes(x, attrs), keepdims=attrs["keep_dim"])
    if x.dtype.kind in "iu":
        info = xp.iinfo(x.dtype)
        return _filled_out(xp, x, attrs, info.min if sign > 0 else info.max)
    return _filled_out(xp, x, attrs, -sign * float("inf"))


def _filled_out(xp, x, attrs, value):
    """Out for an X with no elements: every entry `value`."""
    shape = xp.zeros(x.shape, dtype=bool).sum(axis=_reduce_axes(x, attrs),
                                               keepdims=attrs["keep_dim"]).shape
    return xp.full(shape, value, dtype=x.dtype)


@kernel("reduce_max")
def reduce_max(xp, ins, attrs, want):
    return {"Out": _reduced(_extreme(xp, ins["X"], attrs, "max", 1))}


@kernel("reduce_max_grad", "reduce_min_grad")
def reduce_max_grad(xp, ins, attrs, want):
    # as fluid: every element equal to the maximum (minimum) receives the gradient
    x, out, dout = ins["X"], ins["Out"], ins["Out@GRAD"]
    kept = _kept_shape(x, _reduce_axes(x, attrs))
    return {"X@GRAD": (x == out.reshape(kept)) * dout.reshape(kept)}


@kernel("mean")
def mean(xp, ins, attrs, want):
    x = ins["X"]
    return {"Out": x.mean(dtype=x.dtype).reshape(1)}


@kernel("mean_grad")
def mean_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    return {"X@GRAD": xp.full(x.shape, dout.reshape(()) / x.size, dtype=x.dtype)}


@kernel("squared_l2_norm", sparse=SparseValues(wrap=False))
def squared_l2_norm(xp, ins, attrs, want):
    v = ins["X"].reshape(-1)
    return {"Out": xp.asarray(xp.dot(v, v)).reshape(1)}  # BLAS, no squared temporary


@kernel("squared_l2_norm_grad")
def squared_l2_norm_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    t = x * 2.0
    t *= dout.reshape(())  # 0-d: keeps t's shape whatever X's rank
    return {"X@GRAD": t}


@kernel("reduce_min")
def reduce_min(xp, ins, attrs, want):
    return {"Out": _reduced(_extreme(xp, ins["X"], attrs, "min", -1))}


@kernel("reduce_prod")
def reduce_prod(xp, ins, attrs, want):
    x = ins["X"]
    out = x.prod(axis=_reduce_axes(x, attrs), dtype=x.dtype, keepdims=attrs["keep_dim"])
    return {"Out": _reduced(out)}


@kernel("reduce_prod_grad")
def reduce_prod_grad(xp, ins, attrs, want):
    """d prod / d x_i = the product of the others: exclusive cumulative products from both
    sides, so a zero in X gives no 0/0 (fluid divides Out by X, which does)."""
    x, dout = ins["X"], ins["Out@GRAD"]
    axes = _reduce_axes(x, attrs)
    axes = tuple(range(x.ndim)) if axes is None else axes
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = xp.transpose(x, rest + list(axes))
    flat = moved.reshape(moved.shape[: len(rest)] + (-1,))
    ones = xp.ones(flat.shape[:-1] + (1,), dtype=x.dtype)
    before = xp.cumprod(xp.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    after = xp.flip(xp.cumprod(xp.flip(xp.concatenate([flat[..., 1:], ones], axis=-1), -1),
                               axis=-1), -1)
    others = (before * after).reshape(moved.shape)
    perm = rest + list(axes)
    others = xp.transpose(others, [perm.index(i) for i in range(x.ndim)])
    kept = _kept_shape(x, axes)
    return {"X@GRAD": others * dout.reshape(kept)}


@kernel("reduce_all")
def reduce_all(xp, ins, attrs, want):
    x = ins["X"]
    return {"Out": _reduced(x.all(axis=_reduce_axes(x, attrs), keepdims=attrs["keep_dim"]))}


@kernel("reduce_any")
def reduce_any(xp, ins, attrs, want):
    x = ins["X"]
    return {"Out": _reduced(x.any(axis=_reduce_axes(x, attrs), keepdims=attrs["keep_dim"]))}
