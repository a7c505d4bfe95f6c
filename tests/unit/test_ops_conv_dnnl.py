"""2-D convolutions through oneDNN (spmd/kernels/conv_dnnl.py, the `fast` extra) against
conv_gemm's numpy code: every product, through the kernels and the ops, strides, dilations,
asymmetric padding and transposes, and from two threads at once. Skipped where oneDNN is not
installed; the routing rules are checked everywhere."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from spmd.kernels import conv, conv_dnnl, conv_gemm
from spmd.kernels.registry import run_kernel

needs_dnnl = pytest.mark.skipif(not conv_dnnl.available(),
                                reason="oneDNN is not installed (pip install .[fast])")

CONV = dict(strides=[1, 1], paddings=[0, 0], dilations=[1, 1], groups=1, use_cudnn=False,
            padding_algorithm="EXPLICIT", data_format="NCHW")
GEOMETRIES = [  # (input, filter, attrs)
    ((4, 16, 12, 12), (8, 16, 3, 3), dict(paddings=[1, 1])),
    ((3, 8, 11, 10), (16, 8, 3, 2), dict(strides=[2, 1], paddings=[1, 0, 2, 1],
                                         dilations=[1, 2])),
    ((2, 3, 9, 9), (8, 3, 5, 5), dict(paddings=[2, 2])),  # few channels: numpy's input grad
    ((5, 12, 7, 7), (6, 12, 3, 3), dict(strides=[2, 2])),
    ((2, 8, 6, 6), (4, 8, 1, 1), {}),  # 1x1: numpy
]


def _geometry(x, w, attrs):
    pads, dil, out = conv.conv_setup(x, w, attrs)
    return conv_gemm.geometry(x.shape, w.shape, attrs["groups"], attrs["strides"], dil, pads,
                              out)


def _data(x_shape, w_shape, attrs, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    g = _geometry(x, w, attrs)
    dy = rng.standard_normal((g.n, g.m, g.oh, g.ow)).astype(np.float32)
    return x, w, dy, g


def _products(x, w, dy, g):
    return (conv_gemm.forward(np, x, w, g), conv_gemm.filter_grad(np, x, dy, g),
            conv_gemm.input_grad(np, dy, w, g))


def _close(got, want, what):
    """float32 products summed in another order: relative to the largest value."""
    assert got.dtype == np.float32 and got.shape == want.shape, what
    err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)
    assert err < 1e-5, (what, err)


def _numpy_only(fn):
    previous = conv_dnnl.use(False)
    try:
        return fn()
    finally:
        conv_dnnl.use(previous)


@needs_dnnl
@pytest.mark.parametrize("x_shape, w_shape, attrs", GEOMETRIES)
def test_products_equal_numpy(x_shape, w_shape, attrs):
    attrs = dict(CONV, **attrs)
    x, w, dy, g = _data(x_shape, w_shape, attrs)
    want = _numpy_only(lambda: _products(x, w, dy, g))
    for _ in range(2):  # the second call reuses the cached primitives and buffers
        for what, got, ref in zip(("forward", "filter", "input"), _products(x, w, dy, g), want):
            _close(got, ref, what)


@needs_dnnl
@pytest.mark.parametrize("op", ["conv2d", "conv2d_transpose"])
def test_ops_equal_numpy(op):
    rng = np.random.default_rng(1)
    if op == "conv2d":
        ins = {"Input": rng.standard_normal((3, 16, 10, 10)), "Filter":
               rng.standard_normal((8, 16, 3, 3))}
        attrs, out = dict(CONV, paddings=[1, 1], strides=[2, 2]), "Output"
    else:
        ins = {"Input": rng.standard_normal((3, 16, 5, 5)), "Filter":
               rng.standard_normal((16, 8, 3, 3))}
        attrs = dict(CONV, paddings=[1, 1], strides=[2, 2], output_size=[], output_padding=[])
        out = "Output"
    ins = {k: v.astype(np.float32) for k, v in ins.items()}

    def run():
        y = run_kernel(op, np, ins, attrs, {out})[out]
        dy = np.linspace(-1, 1, y.size, dtype=np.float32).reshape(y.shape)
        grads = run_kernel(op + "_grad", np, dict(ins, **{out + "@GRAD": dy}), attrs,
                           {"Input@GRAD", "Filter@GRAD"})
        return y, grads["Input@GRAD"], grads["Filter@GRAD"]

    for what, got, ref in zip(("y", "dx", "dw"), run(), _numpy_only(run)):
        _close(got, ref, what)


@needs_dnnl
def test_threads_get_their_own_primitives():
    attrs = dict(CONV, paddings=[1, 1])
    x, w, dy, g = _data((4, 16, 12, 12), (8, 16, 3, 3), attrs)
    want = _products(x, w, dy, g)
    errors = []

    def work():
        try:
            for _ in range(20):
                for got, ref in zip(_products(x, w, dy, g), want):
                    np.testing.assert_array_equal(got, ref)
        except AssertionError as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_routing_rules():
    """oneDNN takes float32 convolutions without groups with a kernel larger than 1x1; the
    input gradient only from 8 input channels; an explicit layout or use(False) keeps numpy."""
    attrs = dict(CONV, paddings=[1, 1])
    _, _, _, g = _data((2, 16, 8, 8), (8, 16, 3, 3), attrs)
    _, _, _, few = _data((2, 3, 8, 8), (8, 3, 3, 3), attrs)
    _, _, _, pointwise = _data((2, 16, 8, 8), (8, 16, 1, 1), CONV)
    grouped = conv_gemm.Geometry(**{**g.__dict__, "groups": 2})
    have = conv_dnnl.available()
    assert conv_dnnl.suits(g, "forward", np.float32) is have
    assert conv_dnnl.suits(few, "filter", np.float32) is have
    assert not conv_dnnl.suits(few, "input", np.float32)
    assert not conv_dnnl.suits(g, "forward", np.float64)
    assert not conv_dnnl.suits(pointwise, "forward", np.float32)
    assert not conv_dnnl.suits(grouped, "forward", np.float32)
    previous = conv_dnnl.use(False)
    try:
        assert not conv_dnnl.suits(g, "forward", np.float32)
    finally:
        conv_dnnl.use(previous)


@needs_dnnl
def test_geometries_beyond_the_cache_are_freed_and_remade(monkeypatch):
    monkeypatch.setattr(conv_dnnl, "MAX_CACHED", 1)
    cases = [_data(x_shape, w_shape, dict(CONV, **attrs))
             for x_shape, w_shape, attrs in GEOMETRIES[:2]]
    want = [_numpy_only(lambda c=c: _products(*c)) for c in cases]
    for _ in range(2):  # each geometry evicts the other
        for case, ref in zip(cases, want):
            for what, got, r in zip(("forward", "filter", "input"), _products(*case), ref):
                _close(got, r, what)


@needs_dnnl
def test_strided_copy_copies_views_bit_for_bit():
    """oneDNN's reorder as a strided copy (pool.py's window planes): any non-negative strides,
    size-1 dims, NaN payloads and signed zeros kept; what it cannot take it declines, leaving
    dst as it was."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 6, 8)).astype(np.float32)
    x.flat[::5] = -0.0
    x.view(np.uint32).flat[::7] = 0x7FC00001  # a NaN with a payload
    tiles = np.lib.stride_tricks.as_strided(x, (3, 4, 3, 2, 4, 2),
                                            (x.strides[0], x.strides[1], 2 * x.strides[2],
                                             x.strides[2], 2 * x.strides[3], x.strides[3]))
    for src in (tiles.transpose(3, 5, 0, 1, 2, 4), x[:, :1, ::2, 1::3], x.transpose(2, 0, 3, 1)):
        dst = np.empty(src.shape, np.float32)
        assert conv_dnnl.strided_copy(dst, src)
        assert np.array_equal(dst.view(np.uint32), np.ascontiguousarray(src).view(np.uint32))
        back = np.zeros_like(x)
        view = back[:, :1, ::2, 1::3] if src.shape == x[:, :1, ::2, 1::3].shape else None
        if view is not None:  # into a strided destination
            assert conv_dnnl.strided_copy(view, dst)
            assert np.array_equal(view.view(np.uint32), dst.view(np.uint32))
            assert not back[:, 1:].any()
    dst = np.zeros((8,), np.float32)
    for src in (x[0, 0, 0, ::-1], x[0, 0, 0].astype(np.float64)):  # declined
        assert not conv_dnnl.strided_copy(dst if src.dtype == np.float32 else dst, src)
    assert not dst.any()
    previous = conv_dnnl.use(False)
    try:
        assert not conv_dnnl.strided_copy(np.empty_like(x), x)
    finally:
        conv_dnnl.use(previous)
