"""OpenCV's bicubic resize (cv2.resize with INTER_CUBIC) in numpy, for paddle.dataset.image when
OpenCV is not installed.

Fluid's image helpers resize with OpenCV. This reproduces its arithmetic: pixel centres mapped
by (d + 0.5) * src/dst - 0.5, Keys' cubic kernel with a = -0.75 in float32, edge pixels
repeated; for uint8 images the horizontal pass in integers with coefficients scaled by 2048
and the vertical pass as OpenCV's vectorized loop does it (float32 products, rounded half to
even, saturated), its last `width % 8` values by the integer formula. Checked against
opencv-python 4.2 (fluid 1.8.5's): uint8 results are identical; float32 agree within an ulp or
two (tests/oracle/make_dataset_more.py).

>>> import numpy as np
>>> resize_cubic(np.zeros((4, 6, 3), np.uint8), 3, 2).shape
(2, 3, 3)
"""
from __future__ import annotations

import numpy as np

__all__ = ["resize_cubic"]

_A = np.float32(-0.75)
_F = np.float32
_COEF_SCALE = 2048  # OpenCV's INTER_RESIZE_COEF_SCALE
_LANES = 8  # int16 lanes of the SIMD loop: values past the last full group use the int path


def _coefficients(fx: np.ndarray) -> np.ndarray:
    """Keys' cubic weights of the 4 taps for fractional offsets `fx`, in float32 as OpenCV."""
    x = fx.astype(_F)
    x1 = x + _F(1)
    c0 = ((_A * x1 - _F(5) * _A) * x1 + _F(8) * _A) * x1 - _F(4) * _A
    c1 = ((_A + _F(2)) * x - (_A + _F(3))) * x * x + _F(1)
    y = _F(1) - x
    c2 = ((_A + _F(2)) * y - (_A + _F(3))) * y * y + _F(1)
    c3 = _F(1) - c0 - c1 - c2
    return np.stack([c0, c1, c2, c3], axis=1)


def _taps(src_len: int, dst_len: int):
    """Source indices (clamped: edges repeat) and weights of each output position."""
    scale = 1.0 / (float(dst_len) / src_len)  # OpenCV inverts the inverse scale, in double
    f = ((np.arange(dst_len, dtype=np.float64) + 0.5) * scale - 0.5).astype(_F)
    start = np.floor(f).astype(np.int64)
    frac = (f - start.astype(_F)).astype(_F)
    index = np.clip(start[:, None] + np.arange(-1, 3)[None, :], 0, src_len - 1)
    return index, _coefficients(frac)


def _horizontal(src: np.ndarray, index: np.ndarray, weights: np.ndarray) -> np.ndarray:
    shape = (1, -1) + (1,) * (src.ndim - 2)
    out = src[:, index[:, 0]] * weights[:, 0].reshape(shape)
    for k in range(1, 4):
        out = out + src[:, index[:, k]] * weights[:, k].reshape(shape)
    return out


def _vertical_float(rows: np.ndarray, index: np.ndarray, weights: np.ndarray) -> np.ndarray:
    shape = (-1,) + (1,) * (rows.ndim - 1)
    # OpenCV's vector loop accumulates from the last tap to the first
    out = rows[index[:, 3]] * weights[:, 3].reshape(shape)
    for k in (2, 1, 0):
        out = rows[index[:, k]] * weights[:, k].reshape(shape) + out
    return out


def _resize_uint8(im: np.ndarray, w_new: int, h_new: int) -> np.ndarray:
    h = im.shape[0]
    xi, xw = _taps(im.shape[1], w_new)
    yi, yw = _taps(h, h_new)
    xa = np.rint(xw * _F(_COEF_SCALE)).astype(np.int64)
    ya = np.rint(yw * _F(_COEF_SCALE)).astype(np.int64)
    # |sums| stay below 255 * 2048 * 4 after the horizontal pass: int32 holds them
    rows = _horizontal(im.astype(np.int32), xi, xa.astype(np.int32)).reshape(h, -1)
    width = rows.shape[1]
    vec = width - width % _LANES
    out = np.empty((h_new, width), np.int64)
    if vec:
        beta = (ya.astype(_F) * _F(1.0 / (_COEF_SCALE * _COEF_SCALE))).astype(_F)
        fast = _vertical_float(rows[:, :vec].astype(_F), yi, beta)
        out[:, :vec] = np.rint(fast)
    if vec < width:  # the integer formula OpenCV uses after the last full SIMD group
        tail = rows[:, vec:].astype(np.int64)
        exact = sum(tail[yi[:, k]] * ya[:, k, None] for k in range(4))
        out[:, vec:] = (exact + (1 << 21)) >> 22
    out = np.clip(out, 0, 255).astype(np.uint8)
    return out.reshape((h_new, w_new) + im.shape[2:])


def resize_cubic(im: np.ndarray, w_new: int, h_new: int) -> np.ndarray:
    """`im` (H x W or H x W x C) resized to h_new x w_new as cv2.resize(im, (w_new, h_new),
    interpolation=cv2.INTER_CUBIC) does it. uint8 stays uint8 (rounded, saturated), float32
    and float64 keep their dtype, other integer types are rounded and clipped to their range.

    >>> import numpy as np
    >>> resize_cubic(np.full((2, 2), 7, np.uint8), 4, 4)[0, 0]
    7
    """
    im = np.asarray(im)
    if im.ndim not in (2, 3) or im.shape[0] < 1 or im.shape[1] < 1:
        raise ValueError(f"resize_cubic: expected an H x W or H x W x C image, got shape "
                         f"{im.shape}")
    if im.dtype == np.uint8:
        return _resize_uint8(im, int(w_new), int(h_new))
    work = np.float64 if im.dtype == np.float64 else _F
    xi, xw = _taps(im.shape[1], int(w_new))
    yi, yw = _taps(im.shape[0], int(h_new))
    rows = _horizontal(im.astype(work), xi, xw.astype(work))
    out = _vertical_float(rows, yi, yw.astype(work))
    if np.issubdtype(im.dtype, np.integer):
        info = np.iinfo(im.dtype)
        out = np.clip(np.rint(out), info.min, info.max)
    return out.astype(im.dtype)
