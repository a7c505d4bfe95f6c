"""Kernels: im2sequence, the patches of each image as one sequence of rows (see
spmd/ops/sequence_patches.py). The patch layout is worked out once on the host as flat indices into
the zero-padded batch; the forward is one gather and the gradient one scatter-add."""
from __future__ import annotations

import numpy as np

from ..core.lod import make_lod
from ..core.selected_rows import add_rows
from ..errors import InvalidArgumentError
from .registry import kernel

# -- im2sequence: image patches as a sequence per image ----------------------------------------

def _patch_index(ins, attrs, op: str):
    """Flat indices into the padded batch [N, C, H+pads, W+pads] of every output element,
    [rows, C*kh*kw], and the output's offsets (fluid's kOCF layout: rows by (image, out_y,
    out_x), columns by (channel, ky, kx))."""
    n, c, h, w = ins["X"].shape
    kh, kw = attrs["kernels"]
    sh, sw = attrs["strides"]
    up, left, down, right = attrs["paddings"]
    hp, wp = h + up + down, w + left + right
    oh, ow = (hp - kh) // sh + 1, (wp - kw) // sw + 1
    if oh <= 0 or ow <= 0:
        raise InvalidArgumentError(
            f"{op}: a {kh}x{kw} kernel does not fit the {h}x{w} image with paddings "
            f"{attrs['paddings']}")
    sizes = np.full((n, 2), (oh, ow), dtype=np.int64)
    real = ins.get("Y")
    if real is not None and n > 1:  # fluid reads the real sizes only for batches above 1
        real = np.asarray(real.get() if hasattr(real, "get") else real).reshape(n, 2)
        stride = np.asarray(attrs["out_stride"])
        rh_rw = -(-real.astype(np.int64) // stride)  # ceil(size / out_stride)
        sizes[:, 0] = (rh_rw[:, 0] + up + down - kh) // sh + 1
        sizes[:, 1] = (rh_rw[:, 1] + left + right - kw) // sw + 1
        if (sizes[:, 0] > oh).any() or (sizes[:, 1] > ow).any() or (sizes <= 0).any():
            raise InvalidArgumentError(
                f"{op}: the real image sizes Y {real.tolist()} (divided by out_stride "
                f"{attrs['out_stride']}) must fit the {h}x{w} input and the {kh}x{kw} kernel")
    ci, ky, kx = np.meshgrid(np.arange(c), np.arange(kh), np.arange(kw), indexing="ij")
    ci, ky, kx = ci.reshape(-1), ky.reshape(-1), kx.reshape(-1)
    blocks = []
    for i in range(n):
        y0, x0 = np.meshgrid(np.arange(sizes[i, 0]) * sh, np.arange(sizes[i, 1]) * sw,
                             indexing="ij")
        y = y0.reshape(-1, 1) + ky
        x = x0.reshape(-1, 1) + kx
        blocks.append(((i * c + ci) * hp + y) * wp + x)
    index = np.concatenate(blocks) if blocks else np.zeros((0, c * kh * kw), np.int64)
    counts = sizes[:, 0] * sizes[:, 1]
    return index, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), (up, down, left,
                                                                              right)


@kernel("im2sequence")
def im2sequence(xp, ins, attrs, want):
    x = ins["X"]
    index, offsets, (up, down, left, right) = _patch_index(ins, attrs, "im2sequence")
    padded = xp.pad(x, ((0, 0), (0, 0), (up, down), (left, right)))
    return {"Out": padded.reshape(-1)[xp.asarray(index)], "Out@LOD": make_lod([offsets])}


@kernel("im2sequence_grad")
def im2sequence_grad(xp, ins, attrs, want):
    x = ins["X"]
    index, _, (up, down, left, right) = _patch_index(ins, attrs, "im2sequence_grad")
    n, c, h, w = x.shape
    flat = xp.zeros(n * c * (h + up + down) * (w + left + right), dtype=x.dtype)
    add_rows(xp, flat, xp.asarray(index.reshape(-1)), ins["Out@GRAD"].reshape(-1))
    padded = flat.reshape(n, c, h + up + down, w + left + right)
    return {"X@GRAD": padded[:, :, up:up + h, left:left + w]}
