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
