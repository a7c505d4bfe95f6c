"""roi_align, roi_pool, psroi_pool and prroi_pool: forward against per-sample numpy loops
(prroi_pool against a fine numerical integral of the bilinear interpolant), gradients against
central finite differences in float64 (prroi_pool's in the ROIs too); ROIs carry LoD (ROIs per
image), and a ROI reads only its own image."""
from __future__ import annotations

import math

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import ExecutionError
from tests.op_harness import OpCase, check_op, rand

RNG = np.random.default_rng(7)


def make_rois(count, h, w):
    x1 = RNG.uniform(0, w * 0.6, count)
    y1 = RNG.uniform(0, h * 0.6, count)
    return np.stack([x1, y1, x1 + RNG.uniform(1.0, w * 0.45, count),
                     y1 + RNG.uniform(1.0, h * 0.45, count)], axis=1)


def batch_of(lod):
    return np.repeat(np.arange(len(lod["ROIs"][0])), lod["ROIs"][0])


def bilinear(img, y, x):
    """fluid's roi_align sample: 0 outside [-1, size], edges clamped."""
    h, w = img.shape[-2:]
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return np.zeros(img.shape[:-2])
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * img[..., y0, x0] + (1 - ly) * lx * img[..., y0, x1]
            + ly * (1 - lx) * img[..., y1, x0] + ly * lx * img[..., y1, x1])


def roi_align_ref(X, ROIs, pooled_height, pooled_width, spatial_scale, sampling_ratio, lod,
                  **_):
    out = np.zeros((len(ROIs), X.shape[1], pooled_height, pooled_width))
    for r, (b, roi) in enumerate(zip(batch_of(lod), ROIs)):
        x1, y1, x2, y2 = roi * spatial_scale
        rh, rw = max(y2 - y1, 1.0), max(x2 - x1, 1.0)
        bh, bw = rh / pooled_height, rw / pooled_width
        gh = sampling_ratio if sampling_ratio > 0 else math.ceil(rh / pooled_height)
        gw = sampling_ratio if sampling_ratio > 0 else math.ceil(rw / pooled_width)
        for i in range(pooled_height):
            for j in range(pooled_width):
                acc = 0.0
                for iy in range(gh):
                    for ix in range(gw):
                        acc = acc + bilinear(X[b], y1 + i * bh + (iy + 0.5) * bh / gh,
                                             x1 + j * bw + (ix + 0.5) * bw / gw)
                out[r, :, i, j] = acc / (gh * gw)
    return {"Out": out}


def c_round(v):
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def roi_pool_ref(X, ROIs, pooled_height, pooled_width, spatial_scale, lod, **_):
    n, c, h, w = X.shape
    out = np.zeros((len(ROIs), c, pooled_height, pooled_width))
    arg = np.full(out.shape, -1, dtype=np.int64)
    for r, (b, roi) in enumerate(zip(batch_of(lod), ROIs)):
        x1, y1, x2, y2 = (c_round(v * spatial_scale) for v in roi)
        bh = max(y2 - y1 + 1, 1) / pooled_height
        bw = max(x2 - x1 + 1, 1) / pooled_width
        for i in range(pooled_height):
            for j in range(pooled_width):
                hs = min(max(math.floor(i * bh) + y1, 0), h)
                he = min(max(math.ceil((i + 1) * bh) + y1, 0), h)
                ws = min(max(math.floor(j * bw) + x1, 0), w)
                we = min(max(math.ceil((j + 1) * bw) + x1, 0), w)
                for ch in range(c):
                    best, at = -np.inf, -1
                    for yy in range(hs, he):
                        for xx in range(ws, we):
                            if X[b, ch, yy, xx] > best:
                                best, at = X[b, ch, yy, xx], yy * w + xx
                    out[r, ch, i, j] = best if at >= 0 else 0.0
                    arg[r, ch, i, j] = at
    return {"Out": out, "Argmax": arg}


def psroi_pool_ref(X, ROIs, output_channels, spatial_scale, pooled_height, pooled_width, lod,
                   **_):
    h, w = X.shape[2:]
    out = np.zeros((len(ROIs), output_channels, pooled_height, pooled_width))
    for r, (b, roi) in enumerate(zip(batch_of(lod), ROIs)):
        x1, y1 = c_round(roi[0]) * spatial_scale, c_round(roi[1]) * spatial_scale
        x2, y2 = (c_round(roi[2]) + 1) * spatial_scale, (c_round(roi[3]) + 1) * spatial_scale
        bh = max(y2 - y1, 0.1) / pooled_height
        bw = max(x2 - x1, 0.1) / pooled_width
        for c in range(output_channels):
            for i in range(pooled_height):
                for j in range(pooled_width):
                    hs = min(max(math.floor(i * bh + y1), 0), h)
                    he = min(max(math.ceil((i + 1) * bh + y1), 0), h)
                    ws = min(max(math.floor(j * bw + x1), 0), w)
                    we = min(max(math.ceil((j + 1) * bw + x1), 0), w)
                    if he > hs and we > ws:
                        ch = (c * pooled_height + i) * pooled_width + j
                        out[r, c, i, j] = X[b, ch, hs:he, ws:we].mean()
    return {"Out": out}


def interpolant(img, y, x):
    """The bilinear interpolant of img (zero outside the map) at points (y, x) arrays."""
    h, w = img.shape[-2:]
    y0, x0 = np.floor(y).astype(int), np.floor(x).astype(int)
    total = 0.0
    for dy in (0, 1):
        for dx in (0, 1):
            yy, xx = y0 + dy, x0 + dx
            wgt = (1 - np.abs(y - yy)) * (1 - np.abs(x - xx))
            inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            total = total + np.where(inside, wgt, 0.0) * img[..., np.clip(yy, 0, h - 1),
                                                             np.clip(xx, 0, w - 1)]
    return total


def prroi_pool_ref(X, ROIs, spatial_scale, pooled_height, pooled_width, lod, steps=400, **_):
    """Midpoint rule with `steps` points per bin side: exact to ~1e-6 for a piecewise-bilinear
    integrand whose kinks fall between points."""
    out = np.zeros((len(ROIs), X.shape[1], pooled_height, pooled_width))
    for r, (b, roi) in enumerate(zip(batch_of(lod), ROIs)):
        x1, y1, x2, y2 = roi * spatial_scale
        bh, bw = max(y2 - y1, 0) / pooled_height, max(x2 - x1, 0) / pooled_width
        t = (np.arange(steps) + 0.5) / steps
        for i in range(pooled_height):
            for j in range(pooled_width):
                ys, xs = np.meshgrid(y1 + (i + t) * bh, x1 + (j + t) * bw, indexing="ij")
                out[r, :, i, j] = interpolant(X[b], ys, xs).mean(axis=(-2, -1))
    return {"Out": out}


X1 = rand(2, 3, 6, 7)
ROIS1 = make_rois(4, 6, 7)
LOD1 = {"ROIs": [[3, 1]]}
CASES = [
    OpCase("roi_align", {"X": X1, "ROIs": ROIS1}, roi_align_ref, lod=LOD1,
           attrs={"pooled_height": 2, "pooled_width": 3, "spatial_scale": 1.0,
                  "sampling_ratio": -1}, name="roi_align_adaptive"),
    OpCase("roi_align", {"X": X1, "ROIs": ROIS1 * 2}, roi_align_ref, lod=LOD1,
           attrs={"pooled_height": 3, "pooled_width": 2, "spatial_scale": 0.5,
                  "sampling_ratio": 2}, name="roi_align_ratio2_scale"),
    OpCase("roi_align", {"X": X1, "ROIs": np.array([[-3.0, -2.0, 9.0, 8.5], [5.5, 4.0, 6.0,
                                                                                  4.2]])},
           roi_align_ref, lod={"ROIs": [[1, 1]]},
           attrs={"pooled_height": 2, "pooled_width": 2, "spatial_scale": 1.0,
                  "sampling_ratio": 3}, name="roi_align_past_edges_and_tiny"),
    OpCase("roi_pool", {"X": X1, "ROIs": ROIS1}, roi_pool_ref, lod=LOD1,
           attrs={"pooled_height": 2, "pooled_width": 2, "spatial_scale": 1.0},
           name="roi_pool"),
    OpCase("roi_pool", {"X": X1, "ROIs": ROIS1 * 2}, roi_pool_ref, lod=LOD1,
           attrs={"pooled_height": 3, "pooled_width": 3, "spatial_scale": 0.5},
           name="roi_pool_scale_empty_bins"),
    OpCase("psroi_pool", {"X": rand(2, 2 * 2 * 3, 6, 6), "ROIs": make_rois(3, 6, 6)},
           psroi_pool_ref, lod={"ROIs": [[1, 2]]},
           attrs={"output_channels": 2, "spatial_scale": 1.0, "pooled_height": 2,
                  "pooled_width": 3}, name="psroi_pool"),
    OpCase("prroi_pool", {"X": rand(2, 2, 6, 6), "ROIs": make_rois(3, 6, 6)}, prroi_pool_ref,
           lod={"ROIs": [[2, 1]]}, rtol=1e-5, atol=1e-5,
           attrs={"spatial_scale": 1.0, "pooled_height": 2, "pooled_width": 2},
           name="prroi_pool"),
    OpCase("prroi_pool", {"X": rand(1, 2, 5, 5), "ROIs": np.array([[-1.3, 0.4, 6.1, 3.7]])},
           prroi_pool_ref, lod={"ROIs": [[1]]}, rtol=1e-5, atol=1e-5,
           attrs={"spatial_scale": 1.0, "pooled_height": 3, "pooled_width": 2},
           name="prroi_pool_past_edges"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)


def _program(op, rois_lod_level=1):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3, 6, 7])
        rois = fluid.data("rois", [None, 4], lod_level=rois_lod_level)
        out = op(x, rois)
    return main, out


def test_layers_pool_each_roi_from_its_own_image():
    """roi_align / roi_pool / prroi_pool built by the fluid layers: a ROI of image 1 sees only
    image 1 (zeroing image 0 changes none of its bins)."""
    layers = {
        "roi_align": lambda x, r: fluid.layers.roi_align(x, r, 2, 2, 1.0, 2),
        "roi_pool": lambda x, r: fluid.layers.roi_pool(x, r, 2, 2, 1.0),
        "prroi_pool": lambda x, r: fluid.layers.prroi_pool(x, r, 1.0, 2, 2),
    }
    rois = fluid.create_lod_tensor(ROIS1[:3].astype("float32"), [[2, 1]], fluid.CPUPlace())
    x = X1.astype("float32")
    for name, op in layers.items():
        main, out = _program(op)
        exe = fluid.Executor(fluid.CPUPlace())
        (full,) = exe.run(main, feed={"x": x, "rois": rois}, fetch_list=[out])
        zeroed = x.copy()
        zeroed[0] = 0
        (part,) = exe.run(main, feed={"x": zeroed, "rois": rois}, fetch_list=[out])
        assert full.shape == (3, 3, 2, 2), name
        np.testing.assert_array_equal(part[2], full[2], err_msg=name)
        assert not np.allclose(part[:2], full[:2]), name


def test_rois_without_lod_are_an_error_that_says_how_to_feed_them():
    main, out = _program(lambda x, r: fluid.layers.roi_align(x, r, 2, 2), rois_lod_level=0)
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(ExecutionError, match="create_lod_tensor"):
        exe.run(main, feed={"x": X1.astype("float32"), "rois": ROIS1.astype("float32")},
                fetch_list=[out])


def test_roi_lod_must_match_the_images():
    main, out = _program(lambda x, r: fluid.layers.roi_pool(x, r, 2, 2))
    rois = fluid.create_lod_tensor(ROIS1.astype("float32"), [[1, 1, 2]], fluid.CPUPlace())
    with pytest.raises(ExecutionError, match="one sequence per image"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": X1.astype("float32"),
                                                         "rois": rois}, fetch_list=[out])


def test_rois_lod_input_gives_the_images():
    """rois_lod (a [N + 1] int64 offsets tensor) stands for the ROIs' LoD, as in fluid."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3, 6, 7])
        rois = fluid.data("rois", [None, 4])
        lod = fluid.data("lod", [None], dtype="int64")
        out = fluid.layers.roi_align(x, rois, 2, 2, 1.0, 2, rois_lod=lod)
    exe = fluid.Executor(fluid.CPUPlace())
    (got,) = exe.run(main, feed={"x": X1.astype("float32"), "rois": ROIS1.astype("float32"),
                                 "lod": np.array([0, 3, 4], "int64")}, fetch_list=[out])
    want = roi_align_ref(X1, ROIS1, 2, 2, 1.0, 2, LOD1)["Out"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def deformable_ref(Input, ROIs, Trans, no_trans, spatial_scale, output_dim, group_size,
                   pooled_height, pooled_width, part_size, sample_per_part, trans_std, lod,
                   **_):
    """Bin by bin, sample by sample, as deformable R-FCN's pooling is described."""
    h, w = Input.shape[2:]
    out = np.zeros((len(ROIs), output_dim, pooled_height, pooled_width))
    count = np.zeros(out.shape)
    classes = 1 if no_trans else Trans.shape[1] // 2
    for r, (b, roi) in enumerate(zip(batch_of(lod), ROIs)):
        x1, y1 = c_round(roi[0]) * spatial_scale - 0.5, c_round(roi[1]) * spatial_scale - 0.5
        x2 = (c_round(roi[2]) + 1) * spatial_scale - 0.5
        y2 = (c_round(roi[3]) + 1) * spatial_scale - 0.5
        rw, rh = max(x2 - x1, 0.1), max(y2 - y1, 0.1)
        bw, bh = rw / pooled_width, rh / pooled_height
        for c in range(output_dim):
            for i in range(pooled_height):
                for j in range(pooled_width):
                    pi = math.floor(i / pooled_height * part_size[0])
                    pj = math.floor(j / pooled_width * part_size[1])
                    k = c // (output_dim // classes)
                    tx = 0 if no_trans else Trans[r, 2 * k, pi, pj] * trans_std
                    ty = 0 if no_trans else Trans[r, 2 * k + 1, pi, pj] * trans_std
                    gy = min(max(math.floor(i * group_size[0] / pooled_height), 0),
                             group_size[0] - 1)
                    gx = min(max(math.floor(j * group_size[1] / pooled_width), 0),
                             group_size[1] - 1)
                    img = Input[b, (c * group_size[0] + gy) * group_size[1] + gx]
                    vals = []
                    for si in range(sample_per_part):
                        for sj in range(sample_per_part):
                            xx = j * bw + x1 + tx * rw + sj * bw / sample_per_part
                            yy = i * bh + y1 + ty * rh + si * bh / sample_per_part
                            if xx < -0.5 or xx > w - 0.5 or yy < -0.5 or yy > h - 0.5:
                                continue
                            vals.append(interpolant(img, np.clip(yy, 0, h - 1),
                                                    np.clip(xx, 0, w - 1)))
                    out[r, c, i, j] = np.mean(vals) if vals else 0.0
                    count[r, c, i, j] = len(vals)
    return {"Output": out, "TopCount": count}


DEFORM_ATTRS = {"spatial_scale": 1.0, "pooled_height": 2, "pooled_width": 2,
                "part_size": [2, 2], "sample_per_part": 2, "trans_std": 0.1}
DEFORM_CASES = [
    OpCase("deformable_psroi_pooling",
           {"Input": rand(2, 3, 6, 6), "ROIs": make_rois(3, 6, 6), "Trans": rand(3, 2, 2, 2)},
           deformable_ref, lod={"ROIs": [[2, 1]]}, grad_outputs=["Output"],
           attrs={**DEFORM_ATTRS, "no_trans": False, "output_dim": 3, "group_size": [1, 1]},
           name="deformable_roi_pooling"),
    OpCase("deformable_psroi_pooling",
           {"Input": rand(1, 8, 5, 6), "ROIs": make_rois(2, 5, 6) * 2,
            "Trans": rand(2, 4, 2, 2)},
           deformable_ref, lod={"ROIs": [[2]]}, grad_outputs=["Output"],
           attrs={**DEFORM_ATTRS, "no_trans": False, "output_dim": 2, "group_size": [2, 2],
                  "spatial_scale": 0.5, "sample_per_part": 3},
           name="deformable_roi_pooling_position_sensitive"),
]


@pytest.mark.parametrize("case", DEFORM_CASES, ids=str)
def test_deformable(case):
    check_op(case)


def test_deformable_roi_pooling_layer_moves_bins_with_trans():
    """The layer, position_sensitive and not: zero offsets equal no_trans; offsets move the
    bins (other numbers), and the output is [R, C / (ph * pw), ph, pw] when
    position-sensitive."""
    x = X1[:, :, :6, :6].astype("float32").repeat(4, axis=1)[:, :8]  # 8 channels
    rois = fluid.create_lod_tensor(ROIS1[:3].astype("float32") * 0.8, [[2, 1]],
                                   fluid.CPUPlace())
    results = {}
    for ps in (False, True):
        for moved in (False, True):
            main, startup = fluid.Program(), fluid.Program()
            with fluid.program_guard(main, startup):
                xv = fluid.data("x", [None, 8, 6, 6])
                rv = fluid.data("rois", [None, 4], lod_level=1)
                tv = fluid.data("trans", [None, 2, 2, 2])
                out = fluid.layers.deformable_roi_pooling(
                    xv, rv, tv, pooled_height=2, pooled_width=2, sample_per_part=2,
                    position_sensitive=ps, group_size=[2, 2] if ps else [1, 1])
                still = fluid.layers.deformable_roi_pooling(
                    xv, rv, tv, no_trans=True, pooled_height=2, pooled_width=2,
                    sample_per_part=2, position_sensitive=ps,
                    group_size=[2, 2] if ps else [1, 1])
            trans = RNG.uniform(-1, 1, (3, 2, 2, 2)).astype("float32") * moved
            results[ps, moved] = fluid.Executor(fluid.CPUPlace()).run(
                main, feed={"x": x, "rois": rois, "trans": trans}, fetch_list=[out, still])
        assert results[ps, False][0].shape == ((3, 2, 2, 2) if ps else (3, 8, 2, 2))
        np.testing.assert_allclose(results[ps, False][0], results[ps, False][1], rtol=1e-6)
        assert not np.allclose(results[ps, True][0], results[ps, True][1])


def on_edge(q, x, y, tol=1e-6):
    """Whether (x, y) lies on the quad's boundary (the grid's border maps onto it)."""
    for i in range(4):
        a, b = q[i], q[(i + 1) % 4]
        t = np.clip(np.dot([x - a[0], y - a[1]], b - a) / np.dot(b - a, b - a), 0, 1)
        if np.hypot(*(a + t * (b - a) - [x, y])) < tol:
            return True
    return False


def perspective_ref(X, ROIs, transformed_height, transformed_width, spatial_scale, lod, **_):
    """The output grid mapped by the homography that sends its corners (0, 0), (W' - 1, 0),
    (W' - 1, H - 1), (0, H - 1) to the quad's (W' the width fluid normalizes to the quad's
    aspect), solved here as a linear system; pixels whose source is in the quad and the map
    sample it bilinearly."""
    th, tw = transformed_height, transformed_width
    out = np.zeros((len(ROIs), X.shape[1], th, tw))
    mask = np.zeros((len(ROIs), 1, th, tw), dtype=np.int32)
    h, w = X.shape[2:]
    for r, (b, roi) in enumerate(zip(batch_of(lod), ROIs)):
        q = roi.reshape(4, 2) * spatial_scale
        side = [np.hypot(*(q[i] - q[(i + 1) % 4])) for i in range(4)]
        nh = max(2, th)
        nw = max(2, min(math.floor((side[0] + side[2]) / 2 * (nh - 1)
                                   / ((side[1] + side[3]) / 2) + 0.5) + 1, tw))
        src = [(0, 0), (nw - 1, 0), (nw - 1, nh - 1), (0, nh - 1)]
        a, rhs = [], []
        for (u, v), (x, y) in zip(src, q):
            a.append([u, v, 1, 0, 0, 0, -u * x, -v * x])
            a.append([0, 0, 0, u, v, 1, -u * y, -v * y])
            rhs += [x, y]
        m = np.append(np.linalg.solve(np.array(a, float), np.array(rhs)), 1.0)
        for oh in range(th):
            for ow in range(tw):
                d = m[6] * ow + m[7] * oh + 1
                sx, sy = (m[0] * ow + m[1] * oh + m[2]) / d, (m[3] * ow + m[4] * oh + m[5]) / d
                inside = on_edge(q, sx, sy) or sum(
                    ((q[i, 1] > sy) != (q[(i + 1) % 4, 1] > sy)) and sx < (
                        q[(i + 1) % 4, 0] - q[i, 0]) * (sy - q[i, 1]) / (
                        q[(i + 1) % 4, 1] - q[i, 1]) + q[i, 0] for i in range(4)) % 2 == 1
                if inside and -0.5 < sx < w - 0.5 and -0.5 < sy < h - 0.5:
                    mask[r, 0, oh, ow] = 1
                    out[r, :, oh, ow] = interpolant(X[b], np.clip(sy, 0, h - 1),
                                                    np.clip(sx, 0, w - 1))
    return {"Out": out, "Mask": mask}


PERSPECTIVE_CASE = OpCase(
    "roi_perspective_transform",
    {"X": rand(2, 2, 6, 7), "ROIs": np.array([[1.1, 1.3, 5.2, 0.7, 5.9, 4.1, 0.6, 4.6],
                                               [0.4, 0.9, 6.1, 1.7, 5.5, 5.2, 1.3, 4.8],
                                               [-1.2, 2.1, 4.4, 1.6, 7.9, 5.7, 0.3, 6.2]])},
    perspective_ref, lod={"ROIs": [[2, 1]]}, grad_outputs=["Out"],
    outputs={"Out": 1, "Mask": 1, "TransformMatrix": 1, "Out2InIdx": 1, "Out2InWeights": 1},
    attrs={"transformed_height": 4, "transformed_width": 5, "spatial_scale": 1.0},
    rtol=1e-5, atol=1e-5, name="roi_perspective_transform")


def test_roi_perspective_transform():
    check_op(PERSPECTIVE_CASE)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2, 6, 7])
        rois = fluid.data("rois", [None, 8], lod_level=1)
        out, mask, matrix = fluid.layers.roi_perspective_transform(x, rois, 4, 5)
    quads = fluid.create_lod_tensor(PERSPECTIVE_CASE.inputs["ROIs"].astype("float32"),
                                    [[2, 1]], fluid.CPUPlace())
    got = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": PERSPECTIVE_CASE.inputs["X"].astype("float32"), "rois": quads},
        fetch_list=[out, mask, matrix])
    want = perspective_ref(**PERSPECTIVE_CASE.inputs, **PERSPECTIVE_CASE.attrs,
                           lod=PERSPECTIVE_CASE.lod)
    np.testing.assert_allclose(got[0], want["Out"], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[1], want["Mask"])
    assert got[2].shape == (3, 9)
