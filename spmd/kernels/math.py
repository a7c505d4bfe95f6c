"""Kernels: arithmetic, elementwise ops with fluid's axis broadcasting, activations, reductions."""
from __future__ import annotations

import math

from .registry import kernel


@kernel("sum")
def sum_(xp, ins, attrs, want):
    xs = ins["X"]
    out = xs[0].copy() if len(xs) > 1 else xs[0]
    for x in xs[1:]:
        out += x
    return {"Out": out if len(xs) > 1 else out.copy()}


@kernel("scale")
def scale(xp, ins, attrs, want):
    x, s, b = ins["X"], attrs["scale"], attrs["bias"]
    if attrs["bias_after_scale"]:
        out = x * x.dtype.type(s) + x.dtype.type(b) if b else x * x.dtype.type(s)
    else:
        out = (x + x.dtype.type(b)) * x.dtype.type(s)
    return {"Out": out}


def _as_matrix(a, k):
    return a.reshape(math.prod(a.shape[:k]), -1)


@kernel("mul")
def mul(xp, ins, attrs, want):
    x, y = ins["X"], ins["Y"]
    xk, yk = attrs["x_num_col_dims"], attrs["y_num_col_dims"]
    out = _as_matrix(x, xk) @ _as_matrix(y, yk)
    return {"Out": out.reshape(x.shape[:xk] + y.shape[yk:])}


@kernel("mul_grad")
def mul_grad(xp, ins, attrs, want):
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    xk, yk = attrs["x_num_col_dims"], attrs["y_num_col_dims"]
    x2, y2 = _as_matrix(x, xk), _as_matrix(y, yk)
    d2 = dout.reshape(x2.shape[0], y2.shape[1])
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = (d2 @ y2.T).reshape(x.shape)
    if "Y@GRAD" in want:
        res["Y@GRAD"] = (x2.T @ d2).reshape(y.shape)
    return res


def align_y(x, y, axis):
    """Reshape Y so numpy broadcasting applies fluid's rule: Y's dims match X's from `axis`."""
    if axis == -1 or x.ndim == y.ndim:
        return y
    return y.reshape((1,) * axis + y.shape + (1,) * (x.ndim - axis - y.ndim))


def unbroadcast(xp, grad, shape):
    """Sum `grad` over the axes that broadcasting expanded, giving an array of `shape`."""
    if grad.shape == tuple(shape):
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and grad.shape[lead + i] != 1)
    return grad.sum(axis=axes).reshape(shape) if axes else grad.reshape(shape)


def _y_shape_for_grad(x, y, axis):
    """Shape of Y as aligned against X, for unbroadcasting its gradient."""
    return align_y(x, y, axis).shape


@kernel("elementwise_add")
def elementwise_add(xp, ins, attrs, want):
    x, y = ins["X"], ins["Y"]
    return {"Out": x + align_y(x, y, attrs["axis"])}


@kernel("elementwise_add_grad")
def elementwise_add_grad(xp, ins, attrs, want):
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = unbroadcast(xp, dout, x.shape)
    if "Y@GRAD" in want:
        res["Y@GRAD"] = unbroadcast(xp, dout, _y_shape_for_grad(x, y, attrs["axis"])).reshape(y.shape)
    return res


@kernel("relu")
def relu(xp, ins, attrs, want):
    return {"Out": xp.maximum(ins["X"], 0)}


@kernel("relu_grad")
def relu_grad(xp, ins, attrs, want):
    out, dout = ins["Out"], ins["Out@GRAD"]
    return {"X@GRAD": dout * (out > 0)}


@kernel("mean")
def mean(xp, ins, attrs, want):
    x = ins["X"]
    return {"Out": x.mean(dtype=x.dtype).reshape(1)}


@kernel("mean_grad")
def mean_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    return {"X@GRAD": xp.full(x.shape, dout.reshape(()) / x.size, dtype=x.dtype)}
