"""Kernels: affine_grid, grid_sampler and spectral_norm, with gradients."""
from __future__ import annotations

import numpy as np

from .registry import kernel


def _base_grid(xp, h: int, w: int, dtype):
    """[H, W, 3] of (x, y, 1) with x, y evenly spaced over [-1, 1]."""
    xs = xp.linspace(-1.0, 1.0, w, dtype=dtype)
    ys = xp.linspace(-1.0, 1.0, h, dtype=dtype)
    base = xp.ones((h, w, 3), dtype=dtype)
    base[..., 0] = xs[None, :]
    base[..., 1] = ys[:, None]
    return base


def _grid_hw(ins, attrs):
    if ins.get("OutputShape") is not None:
        shape = [int(v) for v in ins["OutputShape"].reshape(-1).tolist()]  # host or device
    else:
        shape = attrs["output_shape"]
    return shape[2], shape[3]


@kernel("affine_grid")
def affine_grid(xp, ins, attrs, want):
    theta = ins["Theta"]
    h, w = _grid_hw(ins, attrs)
    base = _base_grid(xp, h, w, theta.dtype).reshape(-1, 3)
    return {"Output": xp.matmul(base[None], theta.transpose(0, 2, 1)).reshape(-1, h, w, 2)}


@kernel("affine_grid_grad")
def affine_grid_grad(xp, ins, attrs, want):
    theta, dout = ins["Theta"], ins["Output@GRAD"]
    h, w = _grid_hw(ins, attrs)
    base = _base_grid(xp, h, w, theta.dtype).reshape(-1, 3)
    # out[n] = base @ theta[n]^T  =>  dtheta[n] = dout[n]^T @ base
    return {"Theta@GRAD": xp.matmul(dout.reshape(dout.shape[0], -1, 2).transpose(0, 2, 1),
                                    base[None])}


def _corners(xp, x, grid):
    """The four bilinear corners of every grid point: [(iy, ix, weight, inside)], plus the
    source coordinates (iy, ix) and their scale to grid units."""
    h, w = x.shape[2:]
    ix = (grid[..., 0] + 1) * (w - 1) / 2
    iy = (grid[..., 1] + 1) * (h - 1) / 2
    x0, y0 = xp.floor(ix), xp.floor(iy)
    out = []
    for dy in (0, 1):
        for dx in (0, 1):
            cx, cy = x0 + dx, y0 + dy
            wt = (1 - xp.abs(ix - cx)) * (1 - xp.abs(iy - cy))
            inside = (cx >= 0) & (cx <= w - 1) & (cy >= 0) & (cy <= h - 1)
            out.append((cy.astype(np.int64), cx.astype(np.int64), wt, inside, dx, dy))
    return out, ix, iy, x0, y0


def _read(xp, xt, cy, cx, inside):
    """xt [N, H, W, C] at (n, cy, cx), zero outside: [N, Ho, Wo, C]."""
    n = xp.arange(xt.shape[0]).reshape(-1, 1, 1)
    h, w = xt.shape[1:3]
    vals = xt[n, xp.clip(cy, 0, h - 1), xp.clip(cx, 0, w - 1)]
    return vals * inside[..., None]


@kernel("grid_sampler")
def grid_sampler(xp, ins, attrs, want):
    x, grid = ins["X"], ins["Grid"]
    xt = x.transpose(0, 2, 3, 1)
    corners = _corners(xp, x, grid)[0]
    out = sum(_read(xp, xt, cy, cx, inside) * wt[..., None]
              for cy, cx, wt, inside, _, _ in corners)
    return {"Output": xp.ascontiguousarray(out.transpose(0, 3, 1, 2))}


@kernel("grid_sampler_grad")
def grid_sampler_grad(xp, ins, attrs, want):
    x, grid, dout = ins["X"], ins["Grid"], ins["Output@GRAD"]
    n, c, h, w = x.shape
    xt = x.transpose(0, 2, 3, 1)
    g = dout.transpose(0, 2, 3, 1)  # [N, Ho, Wo, C]
    corners, ix, iy, x0, y0 = _corners(xp, x, grid)
    res = {}
    if "X@GRAD" in want:
        dxt = xp.zeros(n * h * w * c, dtype=x.dtype)
        nn = xp.arange(n).reshape(-1, 1, 1)
        for cy, cx, wt, inside, _, _ in corners:
            flat = ((nn * h + xp.clip(cy, 0, h - 1)) * w + xp.clip(cx, 0, w - 1))[..., None] * c
            flat = flat + xp.arange(c)
            contrib = g * (wt * inside)[..., None]
            dxt += xp.bincount(flat.reshape(-1), weights=contrib.reshape(-1),
                               minlength=dxt.size).astype(x.dtype)
        res["X@GRAD"] = xp.ascontiguousarray(dxt.reshape(n, h, w, c).transpose(0, 3, 1, 2))
    if "Grid@GRAD" in want:
        gx = xp.zeros(ix.shape, dtype=x.dtype)
        gy = xp.zeros(iy.shape, dtype=x.dtype)
        fx, fy = ix - x0, iy - y0
        for cy, cx, _, inside, dx, dy in corners:
            dot = (g * _read(xp, xt, cy, cx, inside)).sum(axis=-1)
            wy = fy if dy else 1 - fy
            wx = fx if dx else 1 - fx
            gx += dot * wy * (1 if dx else -1)
            gy += dot * wx * (1 if dy else -1)
        res["Grid@GRAD"] = xp.stack([gx * (w - 1) / 2, gy * (h - 1) / 2], axis=-1)
    return res


def _spectral(xp, ins, attrs):
    weight, dim = ins["Weight"], attrs["dim"]
    mat = xp.moveaxis(weight, dim, 0).reshape(weight.shape[dim], -1)
    u, v, eps = ins["U"].copy(), ins["V"].copy(), attrs["eps"]
    for _ in range(attrs["power_iters"]):
        v = mat.T @ u
        v = v / (xp.sqrt((v * v).sum()) + eps)
        u = mat @ v
        u = u / (xp.sqrt((u * u).sum()) + eps)
    return mat, u, v, u @ mat @ v


@kernel("spectral_norm")
def spectral_norm(xp, ins, attrs, want):
    weight = ins["Weight"]
    _, _, _, sigma = _spectral(xp, ins, attrs)
    return {"Out": weight / sigma}


@kernel("spectral_norm_grad")
def spectral_norm_grad(xp, ins, attrs, want):
    """fluid 1.8's formula, which is not the derivative of W / sigma:
    dW = dOut * (1 - u v^T * sum(W) / sigma) / sigma, elementwise (u, v the power-iterated
    vectors). The derivative with u, v held fixed would be
    (dOut - sum(dOut * W) / sigma * u v^T) / sigma. spmd follows fluid so that a fluid program
    that trains a spectral-normalized weight trains the same here; checked against stored
    fluid 1.8.5 outputs in tests/unit/test_norm_fluid.py."""
    weight, dim, dout = ins["Weight"], attrs["dim"], ins["Out@GRAD"]
    mat, u, v, sigma = _spectral(xp, ins, attrs)
    dmat = xp.moveaxis(dout, dim, 0).reshape(mat.shape)
    dw = dmat * (1.0 - xp.outer(u, v) * (mat.sum() / sigma)) / sigma
    moved = list(weight.shape)
    moved.insert(0, moved.pop(dim))
    return {"Weight@GRAD": xp.moveaxis(dw.reshape(moved), 0, dim)}
