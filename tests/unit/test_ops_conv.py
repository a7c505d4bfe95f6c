"""conv3d, conv{2,3}d_transpose, pool3d, adaptive pooling and max_pool*_with_index: forward
against plain numpy loops, gradients against finite differences (tests/op_harness.py)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tests.op_harness import OpCase, check_op, rand


def _pads(paddings, nd):
    p = list(paddings)
    return [(p[i], p[i]) for i in range(nd)] if len(p) == nd else [
        (p[2 * i], p[2 * i + 1]) for i in range(nd)]


def conv_ref(Input, Filter, strides, paddings, dilations, groups=1, **_):
    nd = Input.ndim - 2
    pads = _pads(paddings, nd)
    x = np.pad(Input, [(0, 0), (0, 0), *pads])
    m, cg, k = Filter.shape[0], Filter.shape[1], Filter.shape[2:]
    out = [(x.shape[2 + i] - (dilations[i] * (k[i] - 1) + 1)) // strides[i] + 1
           for i in range(nd)]
    y = np.zeros((Input.shape[0], m, *out))
    for n, o in itertools.product(range(Input.shape[0]), range(m)):
        g = o // (m // groups)
        for pos in itertools.product(*[range(v) for v in out]):
            win = tuple(slice(pos[i] * strides[i], pos[i] * strides[i]
                              + dilations[i] * (k[i] - 1) + 1, dilations[i]) for i in range(nd))
            y[(n, o, *pos)] = (x[(n, slice(g * cg, (g + 1) * cg), *win)] * Filter[o]).sum()
    return {"Output": y}


def conv_transpose_ref(Input, Filter, strides, paddings, dilations, groups=1, output_size=(),
                       **_):
    nd = Input.ndim - 2
    pads = _pads(paddings, nd)
    c, mg, k = Filter.shape[0], Filter.shape[1], Filter.shape[2:]
    sp = Input.shape[2:]
    full = [(sp[i] - 1) * strides[i] + dilations[i] * (k[i] - 1) + 1 for i in range(nd)]
    out = list(output_size) or [full[i] - sum(pads[i]) for i in range(nd)]
    buf = np.zeros((Input.shape[0], mg * groups,
                    *[max(full[i], pads[i][0] + out[i]) for i in range(nd)]))
    cg = c // groups
    for n, ci in itertools.product(range(Input.shape[0]), range(c)):
        g = ci // cg
        for pos in itertools.product(*[range(v) for v in sp]):
            for off in itertools.product(*[range(v) for v in k]):
                at = tuple(pos[i] * strides[i] + off[i] * dilations[i] for i in range(nd))
                for mo in range(mg):
                    buf[(n, g * mg + mo, *at)] += Input[(n, ci, *pos)] * Filter[(ci, mo, *off)]
    crop = tuple(slice(pads[i][0], pads[i][0] + out[i]) for i in range(nd))
    return {"Output": buf[(slice(None), slice(None), *crop)]}


def pool_ref(X, pooling_type, ksize, strides, paddings, exclusive=True, **_):
    nd = X.ndim - 2
    pads = _pads(paddings, nd)
    out = [(X.shape[2 + i] + sum(pads[i]) - ksize[i]) // strides[i] + 1 for i in range(nd)]
    y = np.zeros((*X.shape[:2], *out))
    for pos in itertools.product(*[range(v) for v in out]):
        lo = [pos[i] * strides[i] - pads[i][0] for i in range(nd)]
        win = tuple(slice(max(lo[i], 0), min(lo[i] + ksize[i], X.shape[2 + i]))
                    for i in range(nd))
        block = X[(slice(None), slice(None), *win)].reshape(*X.shape[:2], -1)
        if pooling_type == "max":
            y[(slice(None), slice(None), *pos)] = block.max(-1)
        else:
            div = block.shape[-1] if exclusive else math.prod(ksize)
            y[(slice(None), slice(None), *pos)] = block.sum(-1) / div
    return {"Out": y}


def adaptive_ref(X, ksize, pooling_type="max", with_mask=False, **_):
    nd = X.ndim - 2
    sp = X.shape[2:]
    y = np.zeros((*X.shape[:2], *ksize))
    mask = np.zeros(y.shape, np.int32)
    for pos in itertools.product(*[range(v) for v in ksize]):
        win = tuple(slice(pos[i] * sp[i] // ksize[i], -(-(pos[i] + 1) * sp[i] // ksize[i]))
                    for i in range(nd))
        block = X[(slice(None), slice(None), *win)].reshape(*X.shape[:2], -1)
        at = (slice(None), slice(None), *pos)
        y[at] = block.max(-1) if pooling_type == "max" else block.mean(-1)
        flat = np.arange(math.prod(sp)).reshape(sp)[win].reshape(-1)
        mask[at] = flat[block.argmax(-1)]
    return {"Out": y, "Mask": mask} if with_mask else {"Out": y}


CONV = dict(strides=[1, 1], paddings=[0, 0], dilations=[1, 1])
CASES = [
    OpCase("conv3d", {"Input": rand(1, 2, 3, 4, 3), "Filter": rand(2, 2, 2, 2, 2)}, conv_ref,
           attrs=dict(strides=[1, 2, 1], paddings=[1, 0, 0, 1, 1, 0], dilations=[1, 1, 2])),
    OpCase("conv3d", {"Input": rand(1, 4, 3, 3, 3), "Filter": rand(2, 2, 1, 2, 2)}, conv_ref,
           attrs=dict(strides=[1, 1, 1], paddings=[0, 0, 0], dilations=[1, 1, 1], groups=2),
           name="conv3d_groups"),
    OpCase("conv2d_transpose", {"Input": rand(2, 2, 3, 3), "Filter": rand(2, 3, 2, 3)},
           conv_transpose_ref, attrs=dict(strides=[2, 1], paddings=[1, 0], dilations=[1, 2])),
    OpCase("conv2d_transpose", {"Input": rand(1, 4, 2, 3), "Filter": rand(4, 1, 3, 2)},
           conv_transpose_ref, name="conv2d_transpose_groups_output_size",
           attrs=dict(strides=[2, 2], paddings=[1, 1], dilations=[1, 1], groups=2,
                      output_size=[4, 5])),
    OpCase("depthwise_conv2d_transpose", {"Input": rand(1, 2, 3, 3), "Filter": rand(2, 1, 2, 2)},
           conv_transpose_ref, attrs=dict(strides=[1, 1], paddings=[0, 0], dilations=[1, 1],
                                          groups=2)),
    OpCase("conv3d_transpose", {"Input": rand(1, 2, 2, 2, 3), "Filter": rand(2, 2, 2, 1, 2)},
           conv_transpose_ref,
           attrs=dict(strides=[1, 2, 1], paddings=[0, 0, 1], dilations=[1, 1, 1])),
    OpCase("pool3d", {"X": rand(1, 2, 3, 4, 5)}, pool_ref, name="pool3d_max",
           attrs=dict(pooling_type="max", ksize=[2, 2, 3], strides=[1, 2, 2],
                      paddings=[0, 1, 1])),
    OpCase("pool3d", {"X": rand(1, 2, 3, 4, 4)}, pool_ref, name="pool3d_avg_inclusive",
           attrs=dict(pooling_type="avg", ksize=[2, 3, 2], strides=[1, 1, 2],
                      paddings=[1, 1, 0], exclusive=False)),
    OpCase("pool3d", {"X": rand(2, 2, 3, 5, 4)}, adaptive_ref, name="pool3d_adaptive_avg",
           attrs=dict(pooling_type="avg", ksize=[2, 3, 3], adaptive=True)),
    OpCase("pool3d", {"X": rand(1, 2, 3, 5, 4)}, adaptive_ref, name="pool3d_adaptive_max",
           attrs=dict(pooling_type="max", ksize=[1, 2, 3], adaptive=True)),
    OpCase("max_pool2d_with_index", {"X": rand(2, 2, 5, 7)},
           lambda X, **a: adaptive_ref(X, pooling_type="max", with_mask=True, **a),
           attrs=dict(ksize=[2, 3], adaptive=True), name="max_pool2d_with_index_adaptive"),
    OpCase("max_pool3d_with_index", {"X": rand(1, 2, 3, 4, 4)},
           lambda X, **a: adaptive_ref(X, pooling_type="max", with_mask=True, **a),
           attrs=dict(ksize=[2, 2, 3], adaptive=True), name="max_pool3d_with_index_adaptive"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)


def test_max_pool_with_index_fixed_windows():
    x = rand(1, 2, 5, 5)
    ref = pool_ref(x, "max", [3, 3], [2, 2], [1, 1])["Out"]
    mask = np.zeros(ref.shape, np.int32)
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)], constant_values=-np.inf)
    for c, i, j in itertools.product(range(2), range(3), range(3)):
        win = xp[0, c, 2 * i:2 * i + 3, 2 * j:2 * j + 3]
        a, b = np.unravel_index(win.argmax(), win.shape)
        mask[0, c, i, j] = (2 * i + a - 1) * 5 + (2 * j + b - 1)
    check_op(OpCase("max_pool2d_with_index", {"X": x},
                    lambda X, **_: {"Out": ref, "Mask": mask},
                    attrs=dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 1])))


def _bilinear(img, r, c):
    """img [C, H, W] read at (r, c), zero outside, by its four corners."""
    h, w = img.shape[1:]
    r0, c0 = int(np.floor(r)), int(np.floor(c))
    val = np.zeros(img.shape[0])
    for rr, cc in itertools.product((r0, r0 + 1), (c0, c0 + 1)):
        if 0 <= rr < h and 0 <= cc < w:
            val += (1 - abs(r - rr)) * (1 - abs(c - cc)) * img[:, rr, cc]
    return val


def deform_ref(Input, Offset, Filter, Mask=None, strides=(1, 1), paddings=(0, 0),
               dilations=(1, 1), groups=1, deformable_groups=1, **_):
    n, c, h, w = Input.shape
    m, cg, kh, kw = Filter.shape
    oh, ow = Offset.shape[2:]
    dg, kk = deformable_groups, kh * kw
    y = np.zeros((n, m, oh, ow))
    for b, oy, ox in itertools.product(range(n), range(oh), range(ow)):
        cols = np.zeros((c, kh, kw))
        for gi, i, j in itertools.product(range(dg), range(kh), range(kw)):
            k = i * kw + j
            r = oy * strides[0] - paddings[0] + i * dilations[0] + Offset[b, gi * 2 * kk + 2 * k,
                                                                         oy, ox]
            cc = ox * strides[1] - paddings[1] + j * dilations[1] + Offset[
                b, gi * 2 * kk + 2 * k + 1, oy, ox]
            chans = slice(gi * c // dg, (gi + 1) * c // dg)
            v = _bilinear(Input[b, chans], r, cc)
            if Mask is not None:
                v = v * Mask[b, gi * kk + k, oy, ox]
            cols[chans, i, j] = v
        for o in range(m):
            gr = o // (m // groups)
            y[b, o, oy, ox] = (cols[gr * cg:(gr + 1) * cg] * Filter[o]).sum()
    return {"Output": y}


def _offsets(n, dg, k, oh, ow):
    """Offsets that keep every sampling point off the integer grid (the bilinear kinks)."""
    off = rand(n, 2 * dg * k, oh, ow, low=-1.5, high=1.5)
    frac = off - np.floor(off)
    off[np.abs(frac - 0.5) > 0.4] += 0.3
    return off


DEFORM = [
    OpCase("deformable_conv", {"Input": rand(1, 4, 4, 4), "Offset": _offsets(1, 2, 4, 3, 3),
                               "Mask": rand(1, 8, 3, 3, low=0, high=1),
                               "Filter": rand(2, 2, 2, 2)}, deform_ref,
           attrs={"groups": 2, "deformable_groups": 2, "paddings": [0, 0]}),
    OpCase("deformable_conv_v1", {"Input": rand(1, 2, 4, 5), "Offset": _offsets(1, 1, 4, 3, 3),
                                  "Filter": rand(3, 2, 2, 2)}, deform_ref,
           attrs={"strides": [2, 1], "paddings": [1, 0], "dilations": [1, 2]}),
]


@pytest.mark.parametrize("case", DEFORM, ids=str)
def test_deformable_conv(case):
    check_op(case)


# ---- 2-D convolutions: every layout conv_gemm can choose, and tiled pooling -------------------

def _conv2d_case(name, x, w, **attrs):
    return OpCase("conv2d", {"Input": x, "Filter": w}, conv_ref,
                  attrs=dict(CONV, **attrs), name=name)


# shapes picked so that the default choices cover each path: channel-last columns ("rows"),
# NCHW columns ("image"), the input gradient as a flipped convolution or by col2im
CONV2D_CASES = [
    _conv2d_case("conv2d_rows_flip", rand(2, 8, 4, 4), rand(3, 8, 3, 3), paddings=[1, 1]),
    _conv2d_case("conv2d_rows_col2im_stride", rand(2, 8, 5, 4), rand(3, 8, 3, 2),
                 strides=[2, 1], paddings=[1, 0, 0, 1]),
    _conv2d_case("conv2d_rows_dilation", rand(1, 8, 6, 5), rand(2, 8, 2, 3),
                 dilations=[2, 1], paddings=[1, 1]),
    _conv2d_case("conv2d_image_wide", rand(2, 1, 6, 9), rand(3, 1, 3, 3), paddings=[1, 2]),
    _conv2d_case("conv2d_image_groups", rand(1, 6, 5, 5), rand(4, 3, 3, 3), groups=2,
                 strides=[2, 2], paddings=[1, 1]),
    _conv2d_case("conv2d_pointwise", rand(2, 3, 3, 4), rand(5, 3, 1, 1)),
    _conv2d_case("conv2d_pointwise_stride", rand(2, 3, 5, 4), rand(2, 3, 1, 1), strides=[2, 2]),
    OpCase("conv2d", {"Input": rand(1, 8, 5, 6), "Filter": rand(2, 8, 3, 3)},
           lambda **a: conv_ref(**dict(a, paddings=[1, 1, 0, 1])), name="conv2d_rows_same",
           attrs=dict(CONV, strides=[2, 2], padding_algorithm="SAME")),
    OpCase("conv2d", {"Input": rand(1, 8, 5, 5), "Filter": rand(2, 8, 2, 2)},
           lambda **a: conv_ref(**dict(a, paddings=[0, 0])), name="conv2d_rows_valid",
           attrs=dict(CONV, paddings=[3, 3], padding_algorithm="VALID")),
    OpCase("depthwise_conv2d", {"Input": rand(2, 4, 5, 5), "Filter": rand(8, 1, 3, 3)}, conv_ref,
           attrs=dict(CONV, groups=4, paddings=[1, 1]), name="depthwise_multiplier"),
    OpCase("conv2d_transpose", {"Input": rand(2, 3, 4, 4), "Filter": rand(3, 8, 3, 3)},
           conv_transpose_ref, attrs=dict(CONV, paddings=[1, 1]),
           name="conv2d_transpose_same_size"),
    OpCase("conv2d_transpose", {"Input": rand(1, 8, 3, 3), "Filter": rand(8, 2, 3, 3)},
           conv_transpose_ref, attrs=dict(CONV, strides=[2, 2], paddings=[1, 1]),
           name="conv2d_transpose_many_channels"),
]


@pytest.mark.parametrize("case", CONV2D_CASES, ids=str)
def test_conv2d(case):
    check_op(case)


CONV2D_GEOMETRIES = [  # (input, filter, attrs) for test_conv2d_layouts_agree
    ((3, 8, 5, 6), (4, 8, 3, 3), dict(paddings=[1, 1])),
    ((3, 8, 7, 6), (4, 8, 3, 2), dict(strides=[2, 1], paddings=[1, 0, 2, 1], dilations=[1, 2])),
    ((3, 6, 5, 5), (4, 3, 3, 3), dict(groups=2, paddings=[0, 1])),
    ((2, 4, 6, 6), (4, 1, 3, 3), dict(groups=4, strides=[2, 2])),
    ((3, 2, 4, 4), (3, 2, 1, 1), {}),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", CONV2D_GEOMETRIES)
@pytest.mark.parametrize("chunk_bytes", [1, 1 << 20])
def test_conv2d_layouts_agree(x_shape, w_shape, attrs, chunk_bytes, monkeypatch):
    """Every layout of every product (forced), one image per chunk or all at once, equals the
    loop reference and the default choice, in float64; workspaces reused across calls."""
    from spmd.kernels import conv, conv_gemm

    monkeypatch.setattr(conv_gemm, "CHUNK_BYTES", chunk_bytes)
    x, w = rand(*x_shape), rand(*w_shape)
    attrs = dict(CONV, padding_algorithm="EXPLICIT", **attrs)
    attrs.setdefault("groups", 1)
    ref = conv_ref(x, w, **attrs)["Output"]
    dy = rand(*ref.shape)
    # the exact gradients: the adjoint of the reference, by linearity of conv in x and in w
    dx_ref = np.array([(conv_ref(e.reshape(x.shape), w, **attrs)["Output"] * dy).sum()
                       for e in np.eye(x.size)]).reshape(x.shape)
    dw_ref = np.array([(conv_ref(x, e.reshape(w.shape), **attrs)["Output"] * dy).sum()
                       for e in np.eye(w.size)]).reshape(w.shape)
    pads, dil, out = conv.conv_setup(x, w, attrs)
    g = conv_gemm.geometry(x.shape, w.shape, attrs["groups"], attrs["strides"], dil, pads, out)
    flips = ["flip:rows", "flip:image"] if conv_gemm.flipped(g) is not None else []
    for _ in range(2):
        for layout in ("rows", "image", None):
            if layout == "rows" and g.groups != 1:
                continue
            np.testing.assert_allclose(conv_gemm.forward(np, x, w, g, layout), ref, 1e-12,
                                       1e-12)
            np.testing.assert_allclose(conv_gemm.filter_grad(np, x, dy, g, layout), dw_ref,
                                       1e-12, 1e-12)
        for layout in ["rows", "image", None] + flips:
            if layout and layout.endswith("rows") and g.groups != 1:
                continue
            np.testing.assert_allclose(conv_gemm.input_grad(np, dy, w, g, layout), dx_ref,
                                       1e-12, 1e-12)


def test_conv2d_float32_equals_float64_closely():
    """float32 stays float32 (no upcast) and within float32 rounding of float64."""
    x, w = rand(4, 16, 9, 9), rand(8, 16, 3, 3)
    case = _conv2d_case("f32", x, w, paddings=[1, 1])
    want = conv_ref(x, w, **case.attrs)["Output"]
    from spmd.kernels.registry import run_kernel

    attrs = dict(case.attrs, groups=1, padding_algorithm="EXPLICIT", data_format="NCHW")
    got = run_kernel("conv2d", np, {"Input": x.astype("float32"), "Filter": w.astype("float32")},
                     attrs, {"Output"})["Output"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


POOL = dict(paddings=[0, 0], global_pooling=False, adaptive=False, ceil_mode=False,
            exclusive=True, padding_algorithm="EXPLICIT", data_format="NCHW")
TILED_POOL_CASES = [
    OpCase("pool2d", {"X": rand(2, 3, 4, 6)}, pool_ref, name="pool_tiled_max",
           attrs=dict(pooling_type="max", ksize=[2, 2], strides=[2, 2], paddings=[0, 0])),
    OpCase("pool2d", {"X": rand(2, 3, 4, 6)}, pool_ref, name="pool_tiled_avg",
           attrs=dict(pooling_type="avg", ksize=[2, 3], strides=[2, 3], paddings=[0, 0])),
    OpCase("pool2d", {"X": rand(1, 2, 5, 7)}, pool_ref, name="pool_tiled_max_cut",
           attrs=dict(pooling_type="max", ksize=[2, 2], strides=[2, 2], paddings=[0, 0])),
    OpCase("pool2d", {"X": rand(2, 2, 4, 4)}, pool_ref, name="pool_tiled_whole_map",
           attrs=dict(pooling_type="avg", ksize=[4, 4], strides=[1, 1], paddings=[0, 0],
                      exclusive=False)),
    OpCase("pool3d", {"X": rand(1, 2, 2, 4, 4)}, pool_ref, name="pool3d_tiled_max",
           attrs=dict(pooling_type="max", ksize=[2, 2, 2], strides=[2, 2, 2],
                      paddings=[0, 0, 0])),
]


@pytest.mark.parametrize("case", TILED_POOL_CASES, ids=str)
def test_tiled_pool(case):
    check_op(case)


@pytest.mark.parametrize("shape, ksize", [((2, 3, 4, 6), [2, 2]), ((1, 2, 5, 7), [2, 3])])
def test_tiled_max_pool_ties_take_the_first_maximum(shape, ksize):
    """After a relu most windows are all zeros: the gradient goes to the first maximum of
    each window in row-major order, as fluid's and the overlapping-window path's."""
    from spmd.kernels.registry import run_kernel

    x = np.maximum(np.round(rand(*shape) * 2), 0).astype("float32")
    dy = rand(shape[0], shape[1], shape[2] // ksize[0], shape[3] // ksize[1]).astype("float32")
    attrs = dict(POOL, pooling_type="max", ksize=ksize, strides=ksize)
    dx = run_kernel("pool2d_grad", np, {"X": x, "Out@GRAD": dy}, attrs, {"X@GRAD"})["X@GRAD"]
    want = np.zeros_like(x)
    for n, c, i, j in itertools.product(*[range(v) for v in dy.shape]):
        win = x[n, c, i * ksize[0]:(i + 1) * ksize[0], j * ksize[1]:(j + 1) * ksize[1]]
        a, b = np.unravel_index(np.argmax(win), win.shape)  # the first maximum
        want[n, c, i * ksize[0] + a, j * ksize[1] + b] = dy[n, c, i, j]
    np.testing.assert_array_equal(dx, want)
