"""Kernels: the double-grad ops (spmd/ops/grad_grad.py), gradients of grad ops.

Each differentiates a grad op's formula: the first-order gradient dX = f(X, dOut) seen as a
function of its inputs, weighted by DDX (the gradient flowing into dX). Where fluid's own
formula is defined piecewise (relu, leaky_relu, elu) the second derivative is taken inside
each piece, as fluid's kernels do.
"""
from __future__ import annotations

from .math import align_y, unbroadcast
from .registry import kernel


@kernel("relu_grad_grad")
def relu_grad_grad(xp, ins, attrs, want):
    return {"DDOut": ins["DDX"] * (ins["Out"] > 0)}


@kernel("leaky_relu_grad_grad")
def leaky_relu_grad_grad(xp, ins, attrs, want):
    # the same mask as leaky_relu_grad (where x is the larger of x and alpha * x)
    x, ddx, alpha = ins["X"], ins["DDX"], attrs["alpha"]
    return {"DDOut": xp.where(x > x * alpha, ddx, ddx * alpha)}


@kernel("elu_grad_grad")
def elu_grad_grad(xp, ins, attrs, want):
    # dX = dOut * (1 if x > 0 else alpha * exp(x))
    x, dout, ddx, alpha = ins["X"], ins["DOut"], ins["DDX"], attrs["alpha"]
    neg = alpha * xp.exp(xp.minimum(x, 0.0))
    res = {}
    if "DX" in want:
        res["DX"] = xp.where(x > 0, 0.0 * x, ddx * dout * neg)
    if "DDOut" in want:
        res["DDOut"] = xp.where(x > 0, ddx, ddx * neg)
    return res


@kernel("square_grad_grad")
def square_grad_grad(xp, ins, attrs, want):
    # dX = 2 x dOut
    x, dout, ddx = ins["X"], ins["DOut"], ins["DDX"]
    res = {}
    if "DX" in want:
        res["DX"] = 2.0 * ddx * dout
    if "DDOut" in want:
        res["DDOut"] = 2.0 * x * ddx
    return res


@kernel("sqrt_grad_grad")
def sqrt_grad_grad(xp, ins, attrs, want):
    # dX = 0.5 dOut / out: d/dOut = 0.5 / out, d/dout = -dX / out
    out, dx, ddx = ins["Out"], ins["DX"], ins["DDX"]
    res = {}
    if "DOut" in want:
        res["DOut"] = -ddx * dx / out
    if "DDOut" in want:
        res["DDOut"] = 0.5 * ddx / out
    return res


@kernel("reshape2_grad_grad")
def reshape2_grad_grad(xp, ins, attrs, want):
    return {"DDOut": ins["DDX"].reshape(ins["DOut"].shape)}


@kernel("elementwise_div_grad_grad")
def elementwise_div_grad_grad(xp, ins, attrs, want):
    # the grad op: dX = unbroadcast(dOut / y), dY = -unbroadcast(dOut * out / y); its
    # gradients, given ddX (X's shape, which is Out's) and ddY (Y's)
    y, out, dout = ins["Y"], ins["Out"], ins["DOut"]
    ddx, ddy = ins.get("DDX"), ins.get("DDY")
    ya = align_y(out, y, attrs["axis"])
    ddya = None if ddy is None else align_y(out, ddy, attrs["axis"])
    res = {}
    if "DDOut" in want:
        dd = xp.zeros_like(dout)
        if ddx is not None:
            dd = dd + ddx / ya
        if ddya is not None:
            dd = dd - ddya * out / ya
        res["DDOut"] = dd
    if "Out@GRAD" in want:
        res["Out@GRAD"] = (xp.zeros_like(out) if ddya is None else -ddya * dout / ya)
    if "Y@GRAD" in want:
        t = xp.zeros_like(dout)
        if ddx is not None:
            t = t - ddx * dout / (ya * ya)
        if ddya is not None:
            t = t + ddya * dout * out / (ya * ya)
        aligned = unbroadcast(xp, t, ya.shape)
        res["Y@GRAD"] = aligned.reshape(y.shape)
    return res


def _norm_double_grad(xp, g, dy, a, gamma, dds, ddb, eps, want) -> dict:
    """The gradients of a normalization's grad op over groups: `g`, `dy`, `a` (DDX or None)
    are [n, c, m] (the group's m elements last), `gamma`, `dds`, `ddb` per channel ([1, c, 1]
    or None). The grad op: dX = s P(gamma dY), dScale = sum(dY xhat), dBias = sum(dY), with
    xhat = (x - mean) s, s = 1 / sqrt(var + eps) and P(v) = v - mean(v) - xhat mean(v xhat)
    per group. P is its own adjoint and xhat's Jacobian is s P, which gives the formulas
    below. Returns grouped DX, DDY and (per channel) DScale."""
    mean = g.mean(axis=2, keepdims=True)
    s = 1.0 / xp.sqrt(((g - mean) ** 2).mean(axis=2, keepdims=True) + eps)
    xh = (g - mean) * s

    def avg(v):
        return v.mean(axis=2, keepdims=True)

    def project(v):
        return v - avg(v) - xh * avg(v * xh)

    res = {}
    if "DDY" in want:
        ddy = xp.zeros_like(dy)
        if a is not None:
            ddy = ddy + gamma * s * project(a)
        if dds is not None:
            ddy = ddy + dds * xh
        if ddb is not None:
            ddy = ddy + ddb
        res["DDY"] = ddy
    if "DX" in want:
        dx = xp.zeros_like(g)
        if a is not None:
            b = gamma * dy
            ma_xh, mb_xh = avg(a * xh), avg(b * xh)
            dx = dx - s * s * (xh * (avg(a * b) - avg(a) * avg(b) - ma_xh * mb_xh)
                               + project(a) * mb_xh + project(b) * ma_xh)
        if dds is not None:
            dx = dx + dds * s * project(dy)
        res["DX"] = dx
    if "DScale" in want:
        c = g.shape[1]
        res["DScale"] = (xp.zeros((c,), dtype=g.dtype) if a is None
                         else (a * s * project(dy)).sum(axis=(0, 2)))
    return res


def _per_channel(ins, slot, c):
    v = ins.get(slot)
    return None if v is None else v.reshape(1, c, 1)


@kernel("instance_norm_grad_grad")
def instance_norm_grad_grad(xp, ins, attrs, want):
    """instance_norm's grad op differentiated: groups are (sample, channel)."""
    x = ins["X"]
    n, c = x.shape[0], x.shape[1]
    gamma = _per_channel(ins, "Scale", c)
    if gamma is None:
        gamma = xp.ones((1, c, 1), dtype=x.dtype)
    ddx = ins.get("DDX")
    res = _norm_double_grad(xp, x.reshape(n, c, -1), ins["DY"].reshape(n, c, -1),
                            None if ddx is None else ddx.reshape(n, c, -1), gamma,
                            _per_channel(ins, "DDScale", c), _per_channel(ins, "DDBias", c),
                            attrs["epsilon"], want)
    for k in ("DX", "DDY"):
        if k in res:
            res[k] = res[k].reshape(x.shape)
    return res


def _channels_last(x, layout):
    """[1, C, M]: X's elements grouped by channel."""
    c = x.shape[1] if layout == "NCHW" else x.shape[-1]
    if layout == "NCHW":
        return x.swapaxes(0, 1).reshape(1, c, -1)
    return x.reshape(-1, c).T.reshape(1, c, -1)


def _from_channels(g, shape, layout):
    if layout == "NCHW":
        swapped = (shape[1], shape[0], *shape[2:])
        return g.reshape(swapped).swapaxes(0, 1)
    return g.reshape(shape[-1], -1).T.reshape(shape)


@kernel("batch_norm_grad_grad")
def batch_norm_grad_grad(xp, ins, attrs, want):
    """batch_norm's grad op differentiated. With batch statistics the groups are channels
    over the whole batch; with the running ones (is_test, use_global_stats) dX = gamma s dY
    is linear in dY and X enters only through xhat in dScale, so DDY = gamma s DDX +
    DDScale xhat + DDBias, DX = DDScale s dY, DScale = sum(DDX s dY)."""
    x, layout, eps = ins["X"], attrs["data_layout"], attrs["epsilon"]
    c = x.shape[1] if layout == "NCHW" else x.shape[-1]
    g, dy = _channels_last(x, layout), _channels_last(ins["DY"], layout)
    ddx = ins.get("DDX")
    a = None if ddx is None else _channels_last(ddx, layout)
    gamma = ins["Scale"].reshape(1, c, 1)
    dds, ddb = _per_channel(ins, "DDScale", c), _per_channel(ins, "DDBias", c)
    global_stats = ((attrs["is_test"] and not attrs["trainable_statistics"])
                    or attrs["use_global_stats"])
    if global_stats:
        s = 1.0 / xp.sqrt(ins["Variance"].reshape(1, c, 1) + eps)
        xh = (g - ins["Mean"].reshape(1, c, 1)) * s
        res = {}
        if "DDY" in want:
            ddy = xp.zeros_like(dy)
            for term in (None if a is None else gamma * s * a,
                         None if dds is None else dds * xh, ddb):
                if term is not None:
                    ddy = ddy + term
            res["DDY"] = ddy
        if "DX" in want:
            res["DX"] = xp.zeros_like(g) if dds is None else dds * s * dy
        if "DScale" in want:
            res["DScale"] = (xp.zeros((c,), dtype=x.dtype) if a is None
                             else (a * s * dy).sum(axis=(0, 2)))
    elif x.size == c:  # the forward passed X through (one value per channel): dX = dY
        res = {}
        if "DDY" in want:
            res["DDY"] = xp.zeros_like(dy) if a is None else a.copy()
        if "DX" in want:
            res["DX"] = xp.zeros_like(g)
        if "DScale" in want:
            res["DScale"] = xp.zeros((c,), dtype=x.dtype)
    else:
        res = _norm_double_grad(xp, g, dy, a, gamma, dds, ddb, eps, want)
    for k in ("DX", "DDY"):
        if k in res:
            res[k] = _from_channels(res[k], x.shape, layout)
    return res
