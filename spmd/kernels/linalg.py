"""Kernels: addmm, bmm, dot, cross, dist, kron, trace, cos_sim, norm, with their gradients.

>>> # dot([[1, 2]], [[3, 4]]) -> [[11]]
"""
from __future__ import annotations

from .math import unbroadcast
from .registry import kernel


@kernel("addmm")
def addmm(xp, ins, attrs, want):
    out = xp.matmul(ins["X"], ins["Y"])
    out *= attrs["Alpha"]
    out += attrs["Beta"] * ins["Input"]
    return {"Out": out}


@kernel("addmm_grad")
def addmm_grad(xp, ins, attrs, want):
    inp, x, y, dout = ins["Input"], ins["X"], ins["Y"], ins["Out@GRAD"]
    res = {}
    if "Input@GRAD" in want:
        res["Input@GRAD"] = unbroadcast(xp, dout * attrs["Beta"], inp.shape)
    if "X@GRAD" in want:
        res["X@GRAD"] = (dout @ y.T) * attrs["Alpha"]
    if "Y@GRAD" in want:
        res["Y@GRAD"] = (x.T @ dout) * attrs["Alpha"]
    return res


@kernel("bmm")
def bmm(xp, ins, attrs, want):
    return {"Out": xp.matmul(ins["X"], ins["Y"])}


@kernel("bmm_grad")
def bmm_grad(xp, ins, attrs, want):
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = xp.matmul(dout, y.swapaxes(1, 2))
    if "Y@GRAD" in want:
        res["Y@GRAD"] = xp.matmul(x.swapaxes(1, 2), dout)
    return res


@kernel("dot")
def dot(xp, ins, attrs, want):
    x, y = ins["X"], ins["Y"]
    return {"Out": (x * y).sum(axis=-1, keepdims=True)}


@kernel("dot_grad")
def dot_grad(xp, ins, attrs, want):
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = dout * y
    if "Y@GRAD" in want:
        res["Y@GRAD"] = dout * x
    return res


def _cross_axis(x, dim):
    if dim == 9:  # fluid's kDefaultDim: the first axis of size 3
        return list(x.shape).index(3)
    return dim % x.ndim


@kernel("cross")
def cross(xp, ins, attrs, want):
    x = ins["X"]
    return {"Out": xp.cross(x, ins["Y"], axis=_cross_axis(x, attrs["dim"]))}


@kernel("cross_grad")
def cross_grad(xp, ins, attrs, want):
    # d/dx <x cross y, g> = y cross g; d/dy = g cross x
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    axis = _cross_axis(x, attrs["dim"])
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = xp.cross(y, dout, axis=axis)
    if "Y@GRAD" in want:
        res["Y@GRAD"] = xp.cross(dout, x, axis=axis)
    return res


@kernel("dist")
def dist(xp, ins, attrs, want):
    z = xp.abs(ins["X"] - ins["Y"])
    p = attrs["p"]
    if p == 0:
        out = (z != 0).sum().astype(z.dtype)
    elif p == float("inf"):
        out = z.max()
    elif p == float("-inf"):
        out = z.min()
    else:
        out = ((z ** p).sum()) ** (1.0 / p)
    return {"Out": xp.asarray(out, dtype=z.dtype).reshape(1)}


@kernel("dist_grad")
def dist_grad(xp, ins, attrs, want):
    x, y, out, dout = ins["X"], ins["Y"], ins["Out"], ins["Out@GRAD"]
    z = x - y
    p, o = attrs["p"], out.reshape(())
    if p == 0:
        g = xp.zeros_like(z)
    elif p in (float("inf"), float("-inf")):
        g = xp.sign(z) * (xp.abs(z) == o)
    elif o == 0:
        g = xp.zeros_like(z)  # at x == y the norm has no gradient; fluid gives zeros too
    else:
        g = xp.sign(z) * xp.abs(z) ** (p - 1.0) * o ** (1.0 - p)
    g = g * dout.reshape(())
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = unbroadcast(xp, g, x.shape)
    if "Y@GRAD" in want:
        res["Y@GRAD"] = -unbroadcast(xp, g, y.shape)
    return res


@kernel("kron")
def kron(xp, ins, attrs, want):
    return {"Out": xp.kron(ins["X"], ins["Y"])}


@kernel("kron_grad")
def kron_grad(xp, ins, attrs, want):
    """Out viewed as [x0, y0, x1, y1, ...]: each of X, Y gets the other's weighted sum."""
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    n = max(x.ndim, y.ndim)
    xs = (1,) * (n - x.ndim) + x.shape
    ys = (1,) * (n - y.ndim) + y.shape
    d = dout.reshape([s for pair in zip(xs, ys) for s in pair])
    xe = x.reshape([s for a in xs for s in (a, 1)])
    ye = y.reshape([s for b in ys for s in (1, b)])
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = (d * ye).sum(axis=tuple(range(1, 2 * n, 2))).reshape(x.shape)
    if "Y@GRAD" in want:
        res["Y@GRAD"] = (d * xe).sum(axis=tuple(range(0, 2 * n, 2))).reshape(y.shape)
    return res


def _trace_dims(x, attrs):
    return attrs["dim1"] % x.ndim, attrs["dim2"] % x.ndim


@kernel("trace")
def trace(xp, ins, attrs, want):
    x = ins["Input"]
    d1, d2 = _trace_dims(x, attrs)
    out = xp.trace(x, offset=attrs["offset"], axis1=d1, axis2=d2).astype(x.dtype, copy=False)
    return {"Out": out.reshape(1) if out.ndim == 0 else out}


@kernel("trace_grad")
def trace_grad(xp, ins, attrs, want):
    x, dout = ins["Input"], ins["Out@GRAD"]
    d1, d2 = _trace_dims(x, attrs)
    mask_shape = [1] * x.ndim
    mask_shape[d1], mask_shape[d2] = x.shape[d1], x.shape[d2]
    eye = xp.eye(x.shape[d1], x.shape[d2], k=attrs["offset"], dtype=x.dtype)
    mask = (eye if d1 < d2 else eye.T).reshape(mask_shape)
    kept = [1 if i in (d1, d2) else s for i, s in enumerate(x.shape)]
    return {"Input@GRAD": mask * dout.reshape(kept)}


def _rows(a):
    return a.reshape(a.shape[0], -1)


@kernel("cos_sim")
def cos_sim(xp, ins, attrs, want):
    x, y = _rows(ins["X"]), _rows(ins["Y"])
    xn = xp.sqrt((x * x).sum(axis=1, keepdims=True))
    yn = xp.sqrt((y * y).sum(axis=1, keepdims=True))
    out = (x * y).sum(axis=1, keepdims=True) / (xn * yn)
    return {"Out": out, "XNorm": xn, "YNorm": yn}


@kernel("cos_sim_grad")
def cos_sim_grad(xp, ins, attrs, want):
    x, y = _rows(ins["X"]), _rows(ins["Y"])
    xn, yn, out, dout = ins["XNorm"], ins["YNorm"], ins["Out"], ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in want:
        dx = dout * (y / (xn * yn) - out * x / (xn * xn))
        res["X@GRAD"] = dx.reshape(ins["X"].shape)
    if "Y@GRAD" in want:
        dy = dout * (x / (xn * yn) - out * y / (yn * yn))
        if y.shape[0] == 1 and x.shape[0] != 1:  # one Y row was compared with every X row
            dy = dy.sum(axis=0, keepdims=True)
        res["Y@GRAD"] = dy.reshape(ins["Y"].shape)
    return res


@kernel("norm")
def norm(xp, ins, attrs, want):
    x = ins["X"]
    n = (x * x).sum(axis=attrs["axis"], keepdims=True)
    n += attrs["epsilon"]
    xp.sqrt(n, out=n)
    return {"Out": x / n, "Norm": n}


@kernel("norm_grad")
def norm_grad(xp, ins, attrs, want):
    # d(x / |x|) applied to g: (g - y <y, g>) / |x|, with y the normalized x
    out, n, dout = ins["Out"], ins["Norm"], ins["Out@GRAD"]
    dx = dout - out * (out * dout).sum(axis=attrs["axis"], keepdims=True)
    dx /= n
    return {"X@GRAD": dx}
