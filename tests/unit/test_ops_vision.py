"""Interpolation, pixel_shuffle, space_to_depth, shuffle_channel, temporal_shift and unfold:
forward against numpy loops, gradients against finite differences."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.op_harness import OpCase, check_op, rand


def _src(k, size, out, align_corners, align_mode, nearest):
    ratio = ((size - 1) / (out - 1) if align_corners else size / out) if out > 1 else 0.0
    if nearest:
        return [(min(int(ratio * k + 0.5) if align_corners else int(ratio * k), size - 1), 1.0)]
    if align_mode == 0 and not align_corners:
        real = max(ratio * (k + 0.5) - 0.5, 0.0)
    else:
        real = ratio * k
    lo = int(real)
    return [(lo, 1 - (real - lo)), (min(lo + 1, size - 1), real - lo)]


def interp_ref(X, out, align_corners=True, align_mode=1, nearest=False, **_):
    sp = X.shape[2:]
    y = np.zeros((*X.shape[:2], *out))
    for pos in itertools.product(*[range(o) for o in out]):
        axes = [_src(pos[i], sp[i], out[i], align_corners, align_mode, nearest)
                for i in range(len(sp))]
        for combo in itertools.product(*axes):
            w = np.prod([c[1] for c in combo])
            y[(slice(None), slice(None), *pos)] += w * X[(slice(None), slice(None),
                                                           *[c[0] for c in combo])]
    return {"Out": y}


def _interp(op, x, out, **attrs):
    names = ("out_d", "out_h", "out_w")[3 - len(out):]
    full = {**dict(zip(names, out)), **attrs}
    return OpCase(op, {"X": x}, lambda X, **a: interp_ref(
        X, out, nearest=op == "nearest_interp", **attrs),
        attrs=full, name=f"{op}_{out}_{attrs}")


def pixel_shuffle_ref(X, upscale_factor, **_):
    n, c, h, w = X.shape
    r = upscale_factor
    y = np.zeros((n, c // r // r, h * r, w * r))
    for b, ch, i, j in itertools.product(range(n), range(c // r // r), range(h * r),
                                         range(w * r)):
        y[b, ch, i, j] = X[b, ch * r * r + (i % r) * r + j % r, i // r, j // r]
    return {"Out": y}


def shuffle_ref(X, group, **_):
    c = X.shape[1]
    y = np.zeros_like(X)
    for ch in range(c):  # output channel ch reads input channel (ch % g) * (c/g) + ch // g
        y[:, ch] = X[:, (ch % group) * (c // group) + ch // group]
    return {"Out": y}


def temporal_shift_ref(X, seg_num, shift_ratio, **_):
    nt, c, h, w = X.shape
    x = X.reshape(nt // seg_num, seg_num, c, h, w)
    y = np.zeros_like(x)
    c1, c2 = int(c * shift_ratio), int(c * 2 * shift_ratio)
    y[:, 1:, :c1] = x[:, :-1, :c1]  # fluid: the first channels come from the previous frame
    y[:, :-1, c1:c2] = x[:, 1:, c1:c2]
    y[:, :, c2:] = x[:, :, c2:]
    return {"Out": y.reshape(X.shape)}


def unfold_ref(X, kernel_sizes, strides, paddings, dilations, **_):
    n, c, h, w = X.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel_sizes, strides, dilations
    pt, pl, pb, pr = paddings
    xp = np.pad(X, [(0, 0), (0, 0), (pt, pb), (pl, pr)])
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, c * kh * kw, oh * ow))
    for ch, i, j, a, b in itertools.product(range(c), range(kh), range(kw), range(oh),
                                            range(ow)):
        y[:, (ch * kh + i) * kw + j, a * ow + b] = xp[:, ch, a * sh + i * dh, b * sw + j * dw]
    return {"Y": y}


CASES = [
    _interp("bilinear_interp", rand(1, 2, 3, 4), [5, 3]),
    _interp("bilinear_interp", rand(1, 2, 3, 4), [5, 7], align_corners=False, align_mode=0),
    _interp("bilinear_interp", rand(1, 1, 4, 4), [3, 2], align_corners=False, align_mode=1),
    _interp("nearest_interp", rand(1, 2, 3, 4), [5, 3]),
    _interp("nearest_interp", rand(1, 2, 3, 4), [6, 2], align_corners=False),
    _interp("trilinear_interp", rand(1, 1, 2, 3, 3), [3, 2, 4], align_corners=False,
            align_mode=0),
    OpCase("pixel_shuffle", {"X": rand(1, 8, 2, 3)}, pixel_shuffle_ref,
           attrs={"upscale_factor": 2}),
    OpCase("shuffle_channel", {"X": rand(2, 6, 2, 2)}, shuffle_ref, attrs={"group": 3}),
    OpCase("temporal_shift", {"X": rand(6, 4, 2, 2)}, temporal_shift_ref,
           attrs={"seg_num": 3, "shift_ratio": 0.25}),
    OpCase("unfold", {"X": rand(1, 2, 4, 5)}, unfold_ref,
           attrs={"kernel_sizes": [2, 3], "strides": [1, 2], "paddings": [1, 0, 0, 1],
                  "dilations": [1, 1]}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)


def test_space_to_depth_darknet_order_and_grad():
    x = rand(1, 8, 4, 2)
    n, c, h, w = x.shape
    bs, oc = 2, c // 4
    flat = np.zeros(x.size)
    for b, k, j, i in itertools.product(range(n), range(c), range(h), range(w)):
        off = k // oc
        dest = (i * bs + off % bs) + w * bs * ((j * bs + off // bs) + h * bs * (k % oc + oc * b))
        flat[dest] = x[b, k, j, i]
    ref = flat.reshape(1, 32, 2, 1)
    check_op(OpCase("space_to_depth", {"X": x}, lambda X, **_: {"Out": ref},
                    attrs={"blocksize": 2}))


def test_bilinear_nhwc_layout_matches_nchw():
    x = rand(1, 3, 4, 2)
    ref = interp_ref(x.transpose(0, 3, 1, 2), [5, 3])["Out"].transpose(0, 2, 3, 1)
    check_op(OpCase("bilinear_interp", {"X": x}, lambda X, **_: {"Out": ref},
                    attrs={"out_h": 5, "out_w": 3, "data_layout": "NHWC"}))


def affine_grid_ref(Theta, output_shape, **_):
    n, _, h, w = output_shape
    out = np.zeros((Theta.shape[0], h, w, 2))
    for b, i, j in itertools.product(range(Theta.shape[0]), range(h), range(w)):
        x = -1 + 2 * j / (w - 1) if w > 1 else -1.0
        y = -1 + 2 * i / (h - 1) if h > 1 else -1.0
        out[b, i, j] = Theta[b] @ np.array([x, y, 1.0])
    return {"Output": out}


def grid_sampler_ref(X, Grid, **_):
    n, c, h, w = X.shape
    out = np.zeros((n, c, *Grid.shape[1:3]))
    for b, i, j in itertools.product(range(n), *[range(s) for s in Grid.shape[1:3]]):
        ix = (Grid[b, i, j, 0] + 1) * (w - 1) / 2
        iy = (Grid[b, i, j, 1] + 1) * (h - 1) / 2
        x0, y0 = int(np.floor(ix)), int(np.floor(iy))
        for cy, cx in itertools.product((y0, y0 + 1), (x0, x0 + 1)):
            if 0 <= cy < h and 0 <= cx < w:
                out[b, :, i, j] += (1 - abs(ix - cx)) * (1 - abs(iy - cy)) * X[b, :, cy, cx]
    return {"Output": out}


def _grid(n, h, w):
    """Grid points in (-1.3, 1.3), kept off integer source coordinates (the kinks)."""
    g = rand(n, h, w, 2, low=-1.3, high=1.3)
    for axis, size in ((0, w), (1, h)):
        src = (g[..., axis] + 1) * (size - 1) / 2
        near = np.abs(src - np.round(src)) < 0.05
        g[..., axis][near] += 0.2 / (size - 1)
    return g


SAMPLING = [
    OpCase("affine_grid", {"Theta": rand(2, 2, 3)}, affine_grid_ref,
           attrs={"output_shape": [2, 1, 3, 4]}),
    OpCase("grid_sampler", {"X": rand(2, 2, 3, 4), "Grid": _grid(2, 3, 4)}, grid_sampler_ref),
]


@pytest.mark.parametrize("case", SAMPLING, ids=str)
def test_sampling_op(case):
    check_op(case)


def test_runtime_size_inputs():
    """OutputShape / Scale / SizeTensor tensors, read when the program runs (SizeTensor
    before OutSize before Scale, fluid's precedence)."""
    theta = rand(2, 2, 3)
    shape = np.array([2, 1, 3, 4], "int32")
    check_op(OpCase("affine_grid", {"Theta": theta, "OutputShape": shape},
                    lambda Theta, OutputShape, **_: affine_grid_ref(Theta, [2, 1, 3, 4])))
    x = rand(1, 2, 3, 4)
    check_op(OpCase("bilinear_interp", {"X": x, "Scale": np.array([2.0], "float32")},
                    lambda X, **_: interp_ref(X, [6, 8])))
    sizes = [np.array([5], "int32"), np.array([2], "int32")]
    check_op(OpCase("nearest_interp", {"X": x, "SizeTensor": sizes,
                                       "OutSize": np.array([7, 7], "int32")},
                    lambda X, **_: interp_ref(X, [5, 2], nearest=True)))
