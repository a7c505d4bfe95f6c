"""The SSD-family detection ops against numpy loops written from fluid 1.8's op docs (float64
and float32, LoD outputs included), and ssd_loss's gradient against central finite
differences in float64. None of these ops has a gradient in fluid; ssd_loss differentiates
through softmax_with_cross_entropy and smooth_l1."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import ExecutionError, InvalidArgumentError
from tests.op_harness import OpCase, check_forward, run_forward

R = np.random.default_rng(5)


def boxes(n, lo=0.0, hi=1.0):
    a = R.uniform(lo, hi, (n, 2, 2))
    return np.concatenate([a.min(axis=1), a.max(axis=1)], axis=1)


def iou_ref(X, Y, box_normalized=True, **_):
    one = 0.0 if box_normalized else 1.0
    out = np.zeros((len(X), len(Y)))
    for i, j in itertools.product(range(len(X)), range(len(Y))):
        a, b = X[i], Y[j]
        iw = max(min(a[2], b[2]) - max(a[0], b[0]) + one, 0.0)
        ih = max(min(a[3], b[3]) - max(a[1], b[1]) + one, 0.0)
        area = [(c[2] - c[0] + one) * (c[3] - c[1] + one) for c in (a, b)]
        out[i, j] = iw * ih / (area[0] + area[1] - iw * ih)
    return {"Out": out}


def encode_ref(PriorBox, TargetBox, PriorBoxVar=None, box_normalized=True, variance=(), **_):
    one = 0.0 if box_normalized else 1.0
    out = np.zeros((len(TargetBox), len(PriorBox), 4))
    for i, j in itertools.product(range(len(TargetBox)), range(len(PriorBox))):
        p, t = PriorBox[j], TargetBox[i]
        pw, ph = p[2] - p[0] + one, p[3] - p[1] + one
        pcx, pcy = p[0] + pw / 2, p[1] + ph / 2
        tw, th = t[2] - t[0] + one, t[3] - t[1] + one
        code = [((t[0] + t[2]) / 2 - pcx) / pw, ((t[1] + t[3]) / 2 - pcy) / ph,
                math.log(tw / pw), math.log(th / ph)]
        var = PriorBoxVar[j] if PriorBoxVar is not None else (variance or [1.0] * 4)
        out[i, j] = np.array(code) / np.array(var)
    return {"OutputBox": out}


def decode_ref(PriorBox, TargetBox, PriorBoxVar=None, box_normalized=True, variance=(),
               axis=0, **_):
    one = 0.0 if box_normalized else 1.0
    out = np.zeros_like(TargetBox)
    for i, j in itertools.product(*map(range, TargetBox.shape[:2])):
        k = j if axis == 0 else i
        p, d = PriorBox[k], TargetBox[i, j]
        var = PriorBoxVar[k] if PriorBoxVar is not None else (variance or [1.0] * 4)
        pw, ph = p[2] - p[0] + one, p[3] - p[1] + one
        cx, cy = var[0] * d[0] * pw + p[0] + pw / 2, var[1] * d[1] * ph + p[1] + ph / 2
        w, h = math.exp(var[2] * d[2]) * pw, math.exp(var[3] * d[3]) * ph
        out[i, j] = [cx - w / 2, cy - h / 2, cx + w / 2 - one, cy + h / 2 - one]
    return {"OutputBox": out}


PRIORS, GT, VAR = boxes(5), boxes(4), R.uniform(0.1, 0.3, (5, 4))
DELTA = R.uniform(-0.4, 0.4, (3, 5, 4))
CODER = [
    OpCase("box_coder", {"PriorBox": PRIORS, "PriorBoxVar": VAR, "TargetBox": GT}, encode_ref,
           name="encode_var_input"),
    OpCase("box_coder", {"PriorBox": PRIORS * 20, "TargetBox": GT * 20}, encode_ref,
           attrs={"variance": [0.1, 0.1, 0.2, 0.2], "box_normalized": False},
           name="encode_pixels_var_attr"),
    OpCase("box_coder", {"PriorBox": PRIORS, "PriorBoxVar": VAR, "TargetBox": DELTA},
           decode_ref, attrs={"code_type": "decode_center_size"}, name="decode_axis0"),
    OpCase("box_coder", {"PriorBox": PRIORS[:3], "TargetBox": DELTA}, decode_ref,
           attrs={"code_type": "decode_center_size", "axis": 1,
                  "variance": [0.2, 0.1, 0.3, 0.4]}, name="decode_axis1_attr"),
    OpCase("box_coder", {"PriorBox": PRIORS * 9, "TargetBox": DELTA}, decode_ref,
           attrs={"code_type": "decode_center_size", "box_normalized": False},
           name="decode_pixels_no_var"),
    OpCase("iou_similarity", {"X": GT, "Y": PRIORS}, iou_ref, name="iou"),
    OpCase("iou_similarity", {"X": GT * 30, "Y": PRIORS * 30}, iou_ref,
           attrs={"box_normalized": False}, name="iou_pixels"),
]


@pytest.mark.parametrize("case", CODER, ids=str)
def test_coder_and_iou(case):
    check_forward(case, "float64")
    check_forward(case, "float32", rtol=1e-4, atol=1e-5)


def prior_ref(Input, Image, min_sizes, max_sizes=(), aspect_ratios=(1.0,), flip=True,
              clip=True, variances=(0.1, 0.1, 0.2, 0.2), step_w=0.0, step_h=0.0, offset=0.5,
              min_max_aspect_ratios_order=False, **_):
    (fh, fw), (ih, iw) = Input.shape[2:], Image.shape[2:]
    sw, sh = (iw / fw, ih / fh) if step_w == 0 or step_h == 0 else (step_w, step_h)
    ratios = [1.0]
    for r in aspect_ratios:
        if all(abs(r - q) >= 1e-6 for q in ratios):
            ratios += [r, 1 / r] if flip else [r]
    out = []
    for h, w in itertools.product(range(fh), range(fw)):
        cx, cy = (w + offset) * sw, (h + offset) * sh
        cell = []
        for s, mn in enumerate(min_sizes):
            sizes = [(mn * math.sqrt(r), mn / math.sqrt(r)) for r in ratios]
            big = [(math.sqrt(mn * max_sizes[s]),) * 2] if max_sizes else []
            cell += sizes[:1] + big + sizes[1:] if min_max_aspect_ratios_order \
                else sizes + big
        out += [[(cx - bw / 2) / iw, (cy - bh / 2) / ih, (cx + bw / 2) / iw, (cy + bh / 2) / ih]
                for bw, bh in cell]
    b = np.array(out).reshape(fh, fw, -1, 4)
    b = np.clip(b, 0, 1) if clip else b
    return {"Boxes": b, "Variances": np.broadcast_to(variances, b.shape).copy()}


def density_ref(Input, Image, densities, fixed_sizes, fixed_ratios, clip=True,
                variances=(0.1, 0.1, 0.2, 0.2), step_w=0.0, step_h=0.0, offset=0.5,
                flatten_to_2d=False, **_):
    (fh, fw), (ih, iw) = Input.shape[2:], Image.shape[2:]
    sw, sh = (iw / fw, ih / fh) if step_w == 0 or step_h == 0 else (step_w, step_h)
    avg = int((sw + sh) / 2)
    out = []
    for h, w in itertools.product(range(fh), range(fw)):
        cx, cy = (w + offset) * sw, (h + offset) * sh
        for size, dens in zip(fixed_sizes, densities):
            shift = avg // dens
            for r in fixed_ratios:
                bw, bh = size * math.sqrt(r), size / math.sqrt(r)
                for di, dj in itertools.product(range(dens), range(dens)):
                    x = cx - avg / 2 + shift / 2 + dj * shift
                    y = cy - avg / 2 + shift / 2 + di * shift
                    out.append([max((x - bw / 2) / iw, 0), max((y - bh / 2) / ih, 0),
                                min((x + bw / 2) / iw, 1), min((y + bh / 2) / ih, 1)])
    b = np.array(out).reshape((-1, 4) if flatten_to_2d else (fh, fw, -1, 4))
    return {"Boxes": b, "Variances": np.broadcast_to(variances, b.shape).copy()}


FEAT, IMG = R.uniform(size=(1, 2, 3, 4)), np.zeros((1, 3, 24, 36))
PRIOR_CASES = [
    OpCase("prior_box", {"Input": FEAT, "Image": IMG}, prior_ref,
           attrs={"min_sizes": [4.0, 9.0], "max_sizes": [9.0, 14.0],
                  "aspect_ratios": [2.0, 3.0]}, name="prior_box_flip_clip"),
    OpCase("prior_box", {"Input": FEAT, "Image": IMG}, prior_ref,
           attrs={"min_sizes": [6.0], "aspect_ratios": [1.0, 0.5], "flip": False,
                  "clip": False, "step_w": 7.0, "step_h": 5.0, "offset": 0.2,
                  "variances": [0.1, 0.2, 0.3, 0.4]}, name="prior_box_steps"),
    OpCase("prior_box", {"Input": FEAT, "Image": IMG}, prior_ref,
           attrs={"min_sizes": [4.0, 8.0], "max_sizes": [8.0, 12.0], "aspect_ratios": [2.0],
                  "min_max_aspect_ratios_order": True}, name="prior_box_caffe_order"),
    OpCase("density_prior_box", {"Input": FEAT, "Image": IMG}, density_ref,
           attrs={"densities": [2, 1], "fixed_sizes": [4.0, 10.0],
                  "fixed_ratios": [1.0, 2.0]}, name="density"),
    OpCase("density_prior_box", {"Input": FEAT, "Image": IMG}, density_ref,
           attrs={"densities": [3], "fixed_sizes": [6.0], "fixed_ratios": [0.5],
                  "flatten_to_2d": True, "clip": False, "step_w": 8.0, "step_h": 8.0},
           name="density_flat"),
]


@pytest.mark.parametrize("case", PRIOR_CASES, ids=str)
def test_priors(case):
    check_forward(case, "float64")
    check_forward(case, "float32", rtol=1e-5, atol=1e-6)


def match_ref(dist, per_prediction=False, threshold=0.5):
    """Greedy bipartite matching by brute force: the largest remaining entry (> 1e-6) pairs
    its row and column; then (per_prediction) unmatched columns take their best row."""
    rows, cols = dist.shape
    idx, best = -np.ones(cols, int), np.zeros(cols)
    free_rows, free_cols = set(range(rows)), set(range(cols))
    while free_rows and free_cols:
        pairs = [(dist[r, c], -c, -r) for r in free_rows for c in free_cols if dist[r, c] >= 1e-6]
        if not pairs:
            break
        d, c, r = max(pairs)
        idx[-c], best[-c] = -r, d
        free_rows.discard(-r)
        free_cols.discard(-c)
    if per_prediction:
        for c in range(cols):
            if idx[c] == -1 and dist[:, c].max() >= max(threshold, 1e-6):
                idx[c], best[c] = int(np.argmax(dist[:, c])), dist[:, c].max()
    return idx, best


def test_bipartite_match_per_image():
    dist = R.uniform(0, 1, (7, 6))
    dist[2, 3] = 0.0
    lengths = [3, 0, 4]
    for match_type in ("bipartite", "per_prediction"):
        case = OpCase("bipartite_match", {"DistMat": dist}, None,
                      attrs={"match_type": match_type, "dist_threshold": 0.3},
                      outputs={"ColToRowMatchIndices": 1, "ColToRowMatchDist": 1},
                      lod={"DistMat": [lengths]})
        got = run_forward(case)
        start = 0
        for i, n in enumerate(lengths):
            idx, best = match_ref(dist[start:start + n], match_type == "per_prediction", 0.3) \
                if n else (-np.ones(6, int), np.zeros(6))
            np.testing.assert_array_equal(got["ColToRowMatchIndices"][0][i], idx)
            np.testing.assert_allclose(got["ColToRowMatchDist"][0][i], best)
            start += n


def test_target_assign_and_negatives():
    x = R.uniform(size=(5, 4, 3))  # rows of two images (2 + 3), 4 priors, 3 values
    match = np.array([[1, -1, 0, -1], [-1, 2, 2, 0]], np.int32)
    neg = np.array([[1], [3], [0]], np.int32)
    case = OpCase("target_assign", {"X": x, "MatchIndices": match, "NegIndices": neg}, None,
                  attrs={"mismatch_value": 9}, outputs={"Out": 1, "OutWeight": 1},
                  lod={"X": [[2, 3]], "NegIndices": [[2, 1]]})
    got = run_forward(case)
    out, weight = np.full((2, 4, 3), 9.0), np.zeros((2, 4, 1))
    for i, j in itertools.product(range(2), range(4)):
        if match[i, j] >= 0:
            out[i, j], weight[i, j] = x[[0, 2][i] + match[i, j], j], 1
    for i, ids in ((0, [1, 3]), (1, [0])):
        weight[i, ids] = 1  # negatives: the mismatch value, weight 1
    np.testing.assert_allclose(got["Out"][0], out)
    np.testing.assert_allclose(got["OutWeight"][0], weight)
    assert got["OutWeight"][0].dtype == np.float32


def test_mine_hard_examples_max_negative():
    cls = R.uniform(size=(2, 6))
    match = np.array([[0, -1, -1, 1, -1, -1], [-1, -1, -1, -1, 0, -1]], np.int32)
    dist = np.array([[0.9, 0.2, 0.6, 0.8, 0.1, 0.3], [0.1] * 4 + [0.7, 0.4]])
    case = OpCase("mine_hard_examples",
                  {"ClsLoss": cls, "MatchIndices": match, "MatchDist": dist}, None,
                  attrs={"neg_pos_ratio": 1.5, "neg_dist_threshold": 0.5},
                  outputs={"NegIndices": 1, "UpdatedMatchIndices": 1})
    got = run_forward(case, with_lod=True)
    want, lengths = [], []
    for n in range(2):
        cand = [m for m in range(6) if match[n, m] == -1 and dist[n, m] < 0.5]
        k = min(int((match[n] != -1).sum() * 1.5), len(cand))
        picked = sorted(sorted(cand, key=lambda m: -cls[n, m])[:k])
        want += picked
        lengths.append(len(picked))
    np.testing.assert_array_equal(np.array(got["NegIndices"][0]).ravel(), want)
    assert got["NegIndices"][0].recursive_sequence_lengths() == [lengths]
    np.testing.assert_array_equal(np.array(got["UpdatedMatchIndices"][0]), match)


def nms_ref(bbox, score, thr, top_k, nms_thr, keep, background=0):
    rows = []
    for c in range(score.shape[0]):
        if c == background:
            continue
        order = [i for i in np.argsort(-score[c], kind="stable") if score[c, i] > thr][:top_k]
        kept = []
        for i in order:
            if all(iou_ref(bbox[[i]], bbox[[j]])["Out"][0, 0] <= nms_thr for j in kept):
                kept.append(i)
        rows += [(c, i) for i in kept]
    if len(rows) > keep:
        rows = sorted(sorted(rows, key=lambda r: -score[r[0], r[1]])[:keep])
        rows = [(c, i) for c in sorted({c for c, _ in rows})
                for i in sorted([i for cc, i in rows if cc == c], key=lambda i: -score[c, i])]
    return [[c, score[c, i], *bbox[i]] for c, i in rows]


def test_multiclass_nms_batch_and_lod():
    bbox = np.stack([boxes(10), boxes(10)])
    bbox[0, 3] = bbox[0, 2] + 0.005
    score = R.uniform(size=(2, 3, 10))
    attrs = {"score_threshold": 0.3, "nms_top_k": 6, "keep_top_k": 5, "nms_threshold": 0.4}
    case = OpCase("multiclass_nms", {"BBoxes": bbox, "Scores": score}, None, attrs=attrs,
                  outputs={"Out": 1})
    (got,) = run_forward(case, with_lod=True)["Out"]
    want = [nms_ref(bbox[n], score[n], 0.3, 6, 0.4, 5) for n in range(2)]
    assert got.recursive_sequence_lengths() == [[len(w) for w in want]]
    np.testing.assert_allclose(np.array(got), np.array(want[0] + want[1]), rtol=1e-12)


def test_multiclass_nms_keeps_nothing():
    case = OpCase("multiclass_nms", {"BBoxes": boxes(4)[None], "Scores": np.full((1, 2, 4), 0.1)},
                  None, attrs={"score_threshold": 0.5, "nms_top_k": 4, "keep_top_k": 4},
                  outputs={"Out": 1})
    (got,) = run_forward(case, with_lod=True)["Out"]
    assert np.array(got).tolist() == [[-1.0]] and got.lod() == [[0, 1]]


def test_box_clip_per_image():
    x = R.uniform(-20, 80, (5, 4))
    info = np.array([[40.0, 60.0, 2.0], [50.0, 30.0, 1.0]])
    case = OpCase("box_clip", {"Input": x, "ImInfo": info}, None, outputs={"Output": 1},
                  lod={"Input": [[2, 3]]})
    (got,) = run_forward(case, with_lod=True)["Output"]
    want = x.copy()
    for rows, (h, w, s) in ((slice(0, 2), info[0]), (slice(2, 5), info[1])):
        want[rows, 0::2] = np.clip(want[rows, 0::2], 0, round(w / s) - 1)
        want[rows, 1::2] = np.clip(want[rows, 1::2], 0, round(h / s) - 1)
    np.testing.assert_allclose(np.array(got), want)
    assert got.recursive_sequence_lengths() == [[2, 3]]


def _ssd_program(dtype):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        loc = fluid.data("loc", [2, 5, 4], dtype)
        conf = fluid.data("conf", [2, 5, 3], dtype)
        gt = fluid.data("gt", [None, 4], dtype, lod_level=1)
        label = fluid.data("label", [None, 1], "int32", lod_level=1)
        prior = fluid.data("prior", [5, 4], dtype)
        pvar = fluid.data("pvar", [5, 4], dtype)
        for v in (loc, conf):
            v.stop_gradient = False
        loss = fluid.layers.reduce_sum(fluid.layers.ssd_loss(
            loc, conf, gt, label, prior, pvar, overlap_threshold=0.3, neg_pos_ratio=1.0))
        grads = fluid.gradients([loss], [loc, conf])
    return prog, loss, grads


def test_ssd_loss_gradient_matches_finite_differences():
    prior = np.array([[0.0, 0.0, 0.5, 0.5], [0.4, 0.4, 1.0, 1.0], [0.1, 0.5, 0.6, 0.9],
                      [0.3, 0.0, 0.8, 0.4], [0.2, 0.2, 0.7, 0.7]])
    gt = np.array([[0.05, 0.0, 0.45, 0.5], [0.45, 0.4, 0.95, 0.9], [0.2, 0.25, 0.65, 0.7]])
    place = fluid.CPUPlace()
    base = {"loc": R.uniform(-0.3, 0.3, (2, 5, 4)), "conf": R.uniform(-1, 1, (2, 5, 3)),
            "prior": prior, "pvar": np.full((5, 4), 0.2)}

    def feed(values):
        return {**values, "gt": fluid.create_lod_tensor(gt, [[2, 1]], place),
                "label": fluid.create_lod_tensor(np.array([[1], [2], [2]], np.int32), [[2, 1]],
                                                 place)}

    prog, loss, grads = _ssd_program("float64")
    exe = fluid.Executor(place)
    value, g_loc, g_conf = exe.run(prog, feed=feed(base), fetch_list=[loss] + grads)
    assert np.abs(g_loc).sum() > 0 and np.abs(g_conf).sum() > 0
    eps = 1e-6
    for name, analytic in (("loc", g_loc), ("conf", g_conf)):
        numeric = np.zeros_like(base[name])
        for k in np.ndindex(numeric.shape):
            vals = []
            for sign in (1, -1):
                moved = {**base, name: base[name].copy()}
                moved[name][k] += sign * eps
                vals.append(float(exe.run(prog, feed=feed(moved), fetch_list=[loss])[0][0]))
            numeric[k] = (vals[0] - vals[1]) / (2 * eps)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7, err_msg=name)


def test_errors_name_the_fix():
    with pytest.raises(InvalidArgumentError, match="one level of LoD"):
        prog = fluid.Program()
        with fluid.program_guard(prog, fluid.Program()):
            x = fluid.data("x", [4, 3, 2], "float32")
            m = fluid.data("m", [2, 3], "int32")
            fluid.layers.target_assign(x, m)
    with pytest.raises(InvalidArgumentError, match="decode_center_size"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            p = fluid.data("p", [3, 4], "float32")
            fluid.layers.box_coder(p, [0.1] * 4, p, code_type="center")
    with pytest.raises(ExecutionError, match="feed BBoxes as a LoDTensor"):
        case = OpCase("multiclass_nms", {"BBoxes": boxes(3)[:, None, :].repeat(2, 1),
                                         "Scores": R.uniform(size=(3, 2))}, None,
                      attrs={"score_threshold": 0.1, "nms_top_k": 3, "keep_top_k": 3},
                      outputs={"Out": 1})
        run_forward(case)


def matrix_nms_ref(bbox, score, thr, post, top_k, keep, gaussian=False, sigma=2.0):
    """SOLOv2's matrix NMS per class: decay_i = min_j<i f(iou_ij) / f(max_k<j iou_jk)."""
    found = []
    for c in range(1, score.shape[0]):
        order = [i for i in np.argsort(-score[c], kind="stable") if score[c, i] > thr][:top_k]
        iou = np.array([[iou_ref(bbox[[a]], bbox[[b]])["Out"][0, 0] if j < i else 0.0
                         for j, b in enumerate(order)] for i, a in enumerate(order)])
        iou = iou.reshape(len(order), len(order))
        covered = [max([0.0] + [iou[j, k] for k in range(j)]) for j in range(len(order))]
        for i, a in enumerate(order):
            decays = [math.exp((covered[j] ** 2 - iou[i, j] ** 2) * sigma) if gaussian
                      else (1 - iou[i, j]) / (1 - covered[j]) for j in range(i)]
            s = min([1.0] + decays) * score[c, a]
            if s > post:
                found.append([c, s, *bbox[a]])
    return sorted(found, key=lambda r: -r[1])[:keep]


@pytest.mark.parametrize("gaussian", [False, True])
def test_matrix_nms(gaussian):
    bbox = np.stack([boxes(9), boxes(9)])
    score = R.uniform(size=(2, 3, 9))
    attrs = {"score_threshold": 0.2, "post_threshold": 0.15, "nms_top_k": 7, "keep_top_k": 6,
             "use_gaussian": gaussian, "gaussian_sigma": 2.5}
    case = OpCase("matrix_nms", {"BBoxes": bbox, "Scores": score}, None, attrs=attrs,
                  outputs={"Out": 1, "Index": 1})
    got = run_forward(case, with_lod=True)
    want = [matrix_nms_ref(bbox[n], score[n], 0.2, 0.15, 7, 6, gaussian, 2.5) for n in range(2)]
    out = got["Out"][0]
    assert out.recursive_sequence_lengths() == [[len(w) for w in want]]
    np.testing.assert_allclose(np.array(out), np.array(want[0] + want[1]), rtol=1e-12)
    index = np.array(got["Index"][0]).ravel()
    np.testing.assert_allclose(np.array(out)[:, 2:], bbox.reshape(-1, 4)[index])
