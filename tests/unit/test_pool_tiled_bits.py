"""Tiled max/avg pooling (pool.py's stride == window path) bit for bit against the plain
formulation it replaces: the first window offset copied, the others folded in row-major order
with np.maximum / +=, and the gradient to the first maximum of each window (dy times the
first-hit mask). The inputs hold ties (relu zeros, +0 against -0), NaNs with distinct payloads,
infinities and -inf-only windows, contiguous and not."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from spmd.kernels import conv_dnnl
from spmd.kernels.registry import run_kernel

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf - inf, NaN inputs

ATTRS = dict(paddings=[0, 0], global_pooling=False, adaptive=False, ceil_mode=False,
             exclusive=True, padding_algorithm="EXPLICIT", data_format="NCHW")


def _windows(x, k):
    """One [N, C, *out] view per window offset, row-major, and the output shape."""
    nd = x.ndim - 2
    out = [x.shape[2 + i] // k[i] for i in range(nd)]
    views = []
    for off in itertools.product(*[range(v) for v in k]):
        idx = (slice(None), slice(None)) + tuple(
            slice(off[i], off[i] + k[i] * out[i], k[i]) for i in range(nd))
        views.append(x[idx])
    return views, out


def _plain_forward(x, k, kind):
    views, _ = _windows(x, k)
    acc = views[0].copy()
    for v in views[1:]:
        if kind == "max":
            np.maximum(acc, v, out=acc)
        else:
            acc += v
    if kind == "max":
        np.maximum(acc, np.finfo(acc.dtype).min, out=acc)
    else:
        acc /= x.dtype.type(np.prod(k))
    return acc


def _plain_max_grad(x, dy, k):
    views, out = _windows(x, k)
    best = views[0].copy()
    for v in views[1:]:
        np.maximum(best, v, out=best)
    dx = np.zeros_like(x)
    dviews, _ = _windows(dx, k)
    taken = np.zeros(best.shape, dtype=bool)
    for v, d in zip(views, dviews):
        hit = (v == best) & ~taken
        taken |= hit
        np.copyto(d, dy * hit)
    return dx


def _awkward(shape, seed):
    """float32 values with many ties, signed zeros, NaNs of two payloads and infinities."""
    rng = np.random.default_rng(seed)
    x = np.maximum(np.round(rng.standard_normal(shape) * 1.5), 0).astype(np.float32)
    x[rng.random(shape) < 0.3] = -0.0
    specials = np.array([np.nan, np.inf, -np.inf, -1.0], dtype=np.float32)
    specials.view(np.uint32)[0] |= 1  # a second NaN payload beside the default one
    pick = rng.random(shape) < 0.08
    x[pick] = rng.choice(np.concatenate([specials, [np.float32(np.nan)]]), size=pick.sum())
    x[0, 0, :2, :2] = -np.inf  # a window of -inf only
    return x


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


LAYOUTS = ["contiguous", "strided", "transposed"]


def _layout(x, how):
    if how == "strided":  # every other column of a wider array
        wide = np.empty(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        wide[..., ::2] = x
        return wide[..., ::2]
    if how == "transposed":  # channel-last memory seen as NCHW
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    return x


@pytest.mark.parametrize("shape, k", [((3, 4, 8, 12), (2, 2)), ((2, 3, 7, 9), (2, 2)),
                                      ((2, 2, 6, 9), (3, 3)), ((2, 2, 4, 6), (2, 3)),
                                      ((2, 2, 4, 4), (4, 4))])
@pytest.mark.parametrize("how", LAYOUTS)
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("onednn", [True, False], ids=["onednn-copies", "numpy"])
def test_tiled_forward_bits(shape, k, how, kind, onednn):
    x = _layout(_awkward(shape, 1), how)
    attrs = dict(ATTRS, pooling_type=kind, ksize=list(k), strides=list(k))
    previous = conv_dnnl.use(onednn)
    try:
        got = run_kernel("pool2d", np, {"X": x}, attrs, {"Out"})["Out"]
    finally:
        conv_dnnl.use(previous)
    want = _plain_forward(x, k, kind)
    assert got.shape == want.shape
    assert np.array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("shape, k", [((3, 4, 8, 12), (2, 2)), ((2, 3, 7, 9), (2, 2)),
                                      ((2, 2, 6, 9), (3, 3)), ((2, 2, 4, 6), (2, 3))])
@pytest.mark.parametrize("how", LAYOUTS)
@pytest.mark.parametrize("onednn", [True, False], ids=["onednn-copies", "numpy"])
def test_tiled_max_grad_bits(shape, k, how, onednn):
    """Both ways of the gradient: window planes copied apart by oneDNN (where installed) and
    numpy's ufuncs over the interleaved views."""
    previous = conv_dnnl.use(onednn)
    try:
        _check_max_grad(shape, k, how)
    finally:
        conv_dnnl.use(previous)


def _check_max_grad(shape, k, how):
    x = _layout(_awkward(shape, 2), how)
    rng = np.random.default_rng(3)
    out = [shape[2] // k[0], shape[3] // k[1]]
    dy = rng.standard_normal((shape[0], shape[1], *out)).astype(np.float32)
    dy.flat[::7] = -dy.flat[::7]  # negative dy at a non-maximum gives -0.0: kept
    dy.flat[5] = np.inf  # inf * 0 at the other pixels of its window gives NaN: kept
    attrs = dict(ATTRS, pooling_type="max", ksize=list(k), strides=list(k))
    got = run_kernel("pool2d_grad", np, {"X": x, "Out@GRAD": dy}, attrs,
                     {"X@GRAD"})["X@GRAD"]
    assert np.array_equal(_bits(got), _bits(_plain_max_grad(x, dy, k)))
