"""Kernels: group_norm, instance_norm (one channel per group) and lrn, with gradients.

Normalization over a group: xhat = (x - mean) / sqrt(var + eps), y = xhat * scale + bias; the
input gradient is (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) / sqrt(var + eps), means
taken over the group.

group_norm without a Scale input follows fluid 1.8's gradient, not the exact derivative: fluid's
kernel leaves out the -mean(dY) / sqrt(var + eps) term there (it keeps it when Scale is given).
fluid.layers.group_norm adds Scale only when param_attr is given, so this is the gradient of the
default layer; spmd matches it so that a fluid program trains the same here (stored fluid 1.8.5
outputs: tests/unit/test_norm_fluid.py). The dropped term is constant over each group.
"""
from __future__ import annotations

from .registry import kernel


def _grouped(x, groups):
    return x.reshape(x.shape[0], groups, -1)


def _normalize(xp, x, groups, eps):
    xg = _grouped(x, groups)
    mean = xg.mean(axis=2)
    var = xg.var(axis=2)
    xhat = (xg - mean[..., None]) / xp.sqrt(var[..., None] + eps)
    return xhat.reshape(x.shape), mean, var


def _affine(x, ins):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if ins.get("Scale") is not None:
        x = x * ins["Scale"].reshape(shape)
    if ins.get("Bias") is not None:
        x = x + ins["Bias"].reshape(shape)
    return x


def _norm_grad(xp, ins, dy, groups, mean, var, eps, want, fluid_no_scale=False):
    """Gradients of a group normalization; fluid_no_scale: drop the -mean(dxhat) term when
    there is no Scale, as fluid 1.8's group_norm_grad does (see the module docstring)."""
    x = ins["X"]
    shape = (1, -1) + (1,) * (x.ndim - 2)
    xg = _grouped(x, groups)
    inv = 1.0 / xp.sqrt(var.reshape(x.shape[0], groups, 1) + eps)
    xhat = ((xg - mean.reshape(x.shape[0], groups, 1)) * inv).reshape(x.shape)
    axes = (0,) + tuple(range(2, x.ndim))
    res = {}
    if "Scale@GRAD" in want and ins.get("Scale") is not None:
        res["Scale@GRAD"] = (dy * xhat).sum(axis=axes)
    if "Bias@GRAD" in want and ins.get("Bias") is not None:
        res["Bias@GRAD"] = dy.sum(axis=axes)
    if "X@GRAD" in want:
        dxhat = dy * ins["Scale"].reshape(shape) if ins.get("Scale") is not None else dy
        dg, hg = _grouped(dxhat, groups), _grouped(xhat, groups)
        dx = dg - hg * (dg * hg).mean(axis=2, keepdims=True)
        if not (fluid_no_scale and ins.get("Scale") is None):
            dx -= dg.mean(axis=2, keepdims=True)
        dx *= inv
        res["X@GRAD"] = dx.reshape(x.shape)
    return res


@kernel("group_norm")
def group_norm(xp, ins, attrs, want):
    x = ins["X"]
    xhat, mean, var = _normalize(xp, x, attrs["groups"], attrs["epsilon"])
    return {"Y": _affine(xhat, ins), "Mean": mean, "Variance": var}


@kernel("group_norm_grad")
def group_norm_grad(xp, ins, attrs, want):
    return _norm_grad(xp, ins, ins["Y@GRAD"], attrs["groups"], ins["Mean"], ins["Variance"],
                      attrs["epsilon"], want, fluid_no_scale=True)


@kernel("instance_norm")
def instance_norm(xp, ins, attrs, want):
    x, eps = ins["X"], attrs["epsilon"]
    xhat, mean, var = _normalize(xp, x, x.shape[1], eps)
    # fluid saves the inverse standard deviation, not the variance
    return {"Y": _affine(xhat, ins), "SavedMean": mean.reshape(-1),
            "SavedVariance": (1.0 / xp.sqrt(var + eps)).reshape(-1)}


@kernel("instance_norm_grad")
def instance_norm_grad(xp, ins, attrs, want):
    x, eps = ins["X"], attrs["epsilon"]
    var = 1.0 / ins["SavedVariance"] ** 2 - eps
    return _norm_grad(xp, ins, ins["Y@GRAD"], x.shape[1], ins["SavedMean"], var, eps, want)


def _channel_window_sum(xp, a, before: int, after: int):
    """s[:, c] = sum of a[:, c - before .. c + after] (zeros past the ends)."""
    c = a.shape[1]
    padded = xp.zeros((a.shape[0], c + before + after, *a.shape[2:]), dtype=a.dtype)
    padded[:, before:before + c] = a
    csum = xp.concatenate([xp.zeros_like(padded[:, :1]), xp.cumsum(padded, axis=1)], axis=1)
    width = before + after + 1
    return csum[:, width:width + c] - csum[:, :c]


@kernel("lrn")
def lrn(xp, ins, attrs, want):
    x, n = ins["X"], attrs["n"]
    pre = (n - 1) // 2
    mid = attrs["k"] + attrs["alpha"] * _channel_window_sum(xp, x * x, pre, n - 1 - pre)
    return {"Out": x * mid ** -attrs["beta"], "MidOut": mid}


@kernel("lrn_grad")
def lrn_grad(xp, ins, attrs, want):
    x, out, mid, dy = ins["X"], ins["Out"], ins["MidOut"], ins["Out@GRAD"]
    n, beta = attrs["n"], attrs["beta"]
    pre = (n - 1) // 2
    # x_j feeds mid_c for every c whose window holds j: the window mirrored
    t = _channel_window_sum(xp, dy * out / mid, n - 1 - pre, pre)
    return {"X@GRAD": dy * mid ** -beta - 2.0 * attrs["alpha"] * beta * x * t}


_EMPTY = 1e-7  # fluid: a slot whose first value is within this of 0 is empty


def _filled(xp, x, slot: int):
    """[N, C] bool: the slot (of slot_dim columns) holding each column is not empty in that
    row; all True without slots."""
    if slot <= 0:
        return xp.ones(x.shape, dtype=bool)
    first = x[:, ::slot]
    return xp.repeat(xp.abs(first) >= _EMPTY, slot, axis=1)


@kernel("data_norm")
def data_norm(xp, ins, attrs, want):
    x = ins["X"]
    means = ins["BatchSum"] / ins["BatchSize"]
    scales = xp.sqrt(ins["BatchSize"] / ins["BatchSquareSum"])
    y = (x - means) * scales
    if attrs["enable_scale_and_shift"]:
        y = y * ins["scale_w"] + ins["bias"]
    y = xp.where(_filled(xp, x, attrs["slot_dim"]), y, 0)
    return {"Y": y.astype(x.dtype), "Means": means, "Scales": scales}


@kernel("data_norm_grad")
def data_norm_grad(xp, ins, attrs, want):
    x, dy, means, scales = ins["X"], ins["Y@GRAD"], ins["Means"], ins["Scales"]
    slot, eps = attrs["slot_dim"], attrs["epsilon"]
    scaled = attrs["enable_scale_and_shift"]
    filled = _filled(xp, x, slot)
    res = {}
    if "X@GRAD" in want:
        dx = dy * scales * (ins["scale_w"] if scaled else 1)
        # fluid masks the empty slots' gradient only when it scales and shifts
        res["X@GRAD"] = xp.where(filled, dx, 0) if scaled else dx
    if scaled:
        dyf = xp.where(filled, dy, 0)
        res["scale_w@GRAD"] = (dyf * (x - means) * scales).sum(axis=0)
        res["bias@GRAD"] = dyf.sum(axis=0)
    count = filled.sum(axis=0).astype(x.dtype)
    total = (x * filled).sum(axis=0)
    square = (((x - means) ** 2) * filled).sum(axis=0)
    if slot > 0:  # per-slot statistics are averaged over the rows that fill the slot
        safe = xp.maximum(count, 1)
        size, total, square = (count > 0).astype(x.dtype), total / safe, square / safe
        square = xp.where(count > 0, square + count * eps, 0)
    else:
        size, square = count, square + count * eps
    res.update({"BatchSize@GRAD": size, "BatchSum@GRAD": total, "BatchSquareSum@GRAD": square})
    return {k: v for k, v in res.items() if k in want}
