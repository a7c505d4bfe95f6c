"""generate_proposals, distribute_fpn_proposals and collect_fpn_proposals through the fluid
layers, against per-box numpy loops (fluid 1.8.5's outputs are in
test_ops_detection_roi_oracle.py); and a Faster R-CNN / FPN head built from them, whose ROIs
carry their LoD into roi_align."""
from __future__ import annotations

import math

import numpy as np

import spmd.fluid as fluid

RNG = np.random.default_rng(3)


def iou_pixels(a, b):
    iw = min(a[2], b[2]) - max(a[0], b[0]) + 1
    ih = min(a[3], b[3]) - max(a[1], b[1]) + 1
    if iw <= 0 or ih <= 0:
        return 0.0
    area = lambda r: (r[2] - r[0] + 1) * (r[3] - r[1] + 1)  # noqa: E731
    return iw * ih / (area(a) + area(b) - iw * ih)


def proposals_ref(scores, deltas, info, anchors, var, pre, post, thresh, min_size):
    """One image, box by box: decode, clip, filter, greedy NMS (eta 1)."""
    height, width, scale = info
    a = scores.shape[0]
    cand = []
    for k in range(scores.shape[1]):
        for col in range(scores.shape[2]):
            for j in range(a):
                an, v = anchors[k, col, j], var[k, col, j]
                d = deltas[4 * j:4 * j + 4, k, col]
                aw, ah = an[2] - an[0] + 1, an[3] - an[1] + 1
                cx = v[0] * d[0] * aw + an[0] + aw / 2
                cy = v[1] * d[1] * ah + an[1] + ah / 2
                w = math.exp(min(v[2] * d[2], math.log(1000 / 16))) * aw
                h = math.exp(min(v[3] * d[3], math.log(1000 / 16))) * ah
                box = [cx - w / 2, cy - h / 2, cx + w / 2 - 1, cy + h / 2 - 1]
                box = [min(max(box[0], 0), width - 1), min(max(box[1], 0), height - 1),
                       min(max(box[2], 0), width - 1), min(max(box[3], 0), height - 1)]
                cand.append((scores[j, k, col], box))
    cand.sort(key=lambda c: -c[0])
    cand = cand[:pre]
    size = max(min_size, 1.0)
    cand = [(s, b) for s, b in cand if (b[2] - b[0]) / scale + 1 >= size
            and (b[3] - b[1]) / scale + 1 >= size and b[0] + (b[2] - b[0] + 1) / 2 <= width
            and b[1] + (b[3] - b[1] + 1) / 2 <= height]
    kept = []
    for s, b in cand:
        if all(iou_pixels(b, kb) <= thresh for _, kb in kept):
            kept.append((s, b))
    kept = kept[:post]
    return np.array([b for _, b in kept]), np.array([s for s, _ in kept])


def _anchors(h, w, sides=(8.0, 16.0)):
    out = np.zeros((h, w, len(sides), 4), "float32")
    for k in range(h):
        for col in range(w):
            for j, side in enumerate(sides):
                cx, cy = col * 8 + 4, k * 8 + 4
                out[k, col, j] = [cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2]
    return out


def test_generate_proposals_matches_box_by_box_reference():
    n, a, h, w = 2, 2, 4, 5
    feed = {"scores": RNG.uniform(0, 1, (n, a, h, w)).astype("float32"),
            "deltas": RNG.uniform(-1, 1, (n, 4 * a, h, w)).astype("float32"),
            "info": np.array([[32, 40, 1.0], [28, 30, 1.5]], "float32"),
            "anchors": _anchors(h, w),
            "var": np.tile(np.array([0.1, 0.1, 0.2, 0.2], "float32"), (h, w, a, 1))}
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = {k: fluid.data(k, list(x.shape), dtype="float32") for k, x in feed.items()}
        rois, probs, num = generate_proposals = fluid.layers.generate_proposals(
            v["scores"], v["deltas"], v["info"], v["anchors"], v["var"], pre_nms_top_n=25,
            post_nms_top_n=8, nms_thresh=0.6, min_size=2.0, return_rois_num=True)
        assert len(generate_proposals) == 3
    got_rois, got_probs, got_num = fluid.Executor(fluid.CPUPlace()).run(
        main, feed=feed, fetch_list=[rois, probs, num], return_numpy=False)
    lengths = got_rois.recursive_sequence_lengths()[0]
    assert got_probs.recursive_sequence_lengths()[0] == lengths
    np.testing.assert_array_equal(np.array(got_num), np.cumsum(lengths))
    start = 0
    for i, count in enumerate(lengths):
        want_rois, want_probs = proposals_ref(
            feed["scores"][i], feed["deltas"][i], feed["info"][i], feed["anchors"],
            feed["var"], 25, 8, 0.6, 2.0)
        np.testing.assert_allclose(np.array(got_rois)[start:start + count], want_rois,
                                   rtol=1e-5, atol=1e-4, err_msg=f"image {i}")
        np.testing.assert_allclose(np.array(got_probs)[start:start + count, 0], want_probs,
                                   rtol=1e-6)
        start += count


def _levels_program(rois_np, lod, lo, hi):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        rois = fluid.data("rois", [None, 4], lod_level=1)
        multi, restore = fluid.layers.distribute_fpn_proposals(rois, lo, hi, 4, 224)
        joined = fluid.layers.concat(multi, axis=0)
    feed = {"rois": fluid.create_lod_tensor(rois_np, lod, fluid.CPUPlace())}
    return fluid.Executor(fluid.CPUPlace()).run(main, feed=feed,
                                                fetch_list=[*multi, restore, joined],
                                                return_numpy=False)


def test_distribute_fpn_proposals_levels_and_restore_index():
    """Each ROI goes to floor(log2(sqrt(area) / 224) + 4) clamped to [2, 5], its image's LoD
    per level; gathering the levels laid end to end by RestoreIndex gives the ROIs back."""
    side = np.array([10, 40, 120, 230, 470, 900, 15, 300])
    x0 = RNG.uniform(0, 50, side.size)
    rois = np.stack([x0, x0, x0 + side - 1, x0 + side - 1], 1).astype("float32")
    out = _levels_program(rois, [[5, 3]], 2, 5)
    multi, restore, joined = out[:4], np.array(out[4]), np.array(out[5])
    np.testing.assert_array_equal(joined[restore[:, 0]], rois)
    for lv, t in zip(range(2, 6), multi):
        want = [i for i, s in enumerate(side)
                if min(5, max(2, math.floor(math.log2(s / 224 + 1e-6) + 4))) == lv]
        np.testing.assert_array_equal(np.array(t), rois[want])
        per_image = [sum(1 for i in want if i < 5), sum(1 for i in want if i >= 5)]
        assert t.recursive_sequence_lengths() == [per_image], (lv, per_image)


def test_collect_fpn_proposals_keeps_the_best_grouped_by_image():
    levels = [RNG.uniform(0, 50, (4, 4)).astype("float32"),
              RNG.uniform(0, 50, (3, 4)).astype("float32")]
    scores = [RNG.uniform(0, 1, (4, 1)).astype("float32"),
              RNG.uniform(0, 1, (3, 1)).astype("float32")]
    lods = [[[1, 3]], [[2, 1]]]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        r = [fluid.data(f"r{i}", [None, 4], lod_level=1) for i in range(2)]
        s = [fluid.data(f"s{i}", [None, 1], lod_level=1) for i in range(2)]
        out = fluid.layers.collect_fpn_proposals(r, s, 2, 3, post_nms_top_n=4)
    place = fluid.CPUPlace()
    feed = {**{f"r{i}": fluid.create_lod_tensor(levels[i], lods[i], place) for i in range(2)},
            **{f"s{i}": fluid.create_lod_tensor(scores[i], lods[i], place) for i in range(2)}}
    (got,) = fluid.Executor(place).run(main, feed=feed, fetch_list=[out], return_numpy=False)
    image = [0, 1, 1, 1, 0, 0, 1]
    all_rois, all_scores = np.concatenate(levels), np.concatenate(scores)[:, 0]
    best = sorted(np.argsort(-all_scores)[:4], key=lambda i: (image[i], -all_scores[i]))
    np.testing.assert_array_equal(np.array(got), all_rois[best])
    assert got.recursive_sequence_lengths() == [[sum(image[i] == 0 for i in best),
                                                 sum(image[i] == 1 for i in best)]]


def test_rpn_proposals_feed_roi_align_with_their_lod():
    """anchor_generator -> generate_proposals -> roi_align: the proposals' LoD (per image)
    tells roi_align which image each ROI pools from; the pooled rows of image 1 do not change
    when image 0's features do."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        feat = fluid.data("feat", [None, 4, 6, 6])
        info = fluid.data("info", [None, 3])
        anchors, var = fluid.layers.anchor_generator(feat, [16.0, 32.0], [1.0],
                                                     stride=[8.0, 8.0])
        scores = fluid.layers.conv2d(feat, 2, 1, act="sigmoid")
        deltas = fluid.layers.conv2d(feat, 8, 1)
        rois, _ = fluid.layers.generate_proposals(scores, deltas, info, anchors, var,
                                                  pre_nms_top_n=20, post_nms_top_n=5)
        pooled = fluid.layers.roi_align(feat, rois, 2, 2, spatial_scale=1 / 8,
                                        sampling_ratio=2)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    x = RNG.uniform(-1, 1, (2, 4, 6, 6)).astype("float32")
    im = np.array([[48, 48, 1.0], [48, 48, 1.0]], "float32")
    got_rois, got = exe.run(main, feed={"feat": x, "info": im}, fetch_list=[rois, pooled],
                            return_numpy=False)
    n0, n1 = got_rois.recursive_sequence_lengths()[0]
    assert n0 >= 1 and n1 >= 1 and np.array(got).shape == (n0 + n1, 4, 2, 2)
    # the same ROIs, image 0's features zeroed: image 1's pooled rows stay
    main2, startup2 = fluid.Program(), fluid.Program()
    with fluid.program_guard(main2, startup2):
        f2 = fluid.data("feat", [None, 4, 6, 6])
        r2 = fluid.data("rois", [None, 4], lod_level=1)
        p2 = fluid.layers.roi_align(f2, r2, 2, 2, spatial_scale=1 / 8, sampling_ratio=2)
    zeroed = x.copy()
    zeroed[0] = 0
    rois_t = fluid.create_lod_tensor(np.array(got_rois), [[n0, n1]], fluid.CPUPlace())
    (again,) = exe.run(main2, feed={"feat": zeroed, "rois": rois_t}, fetch_list=[p2])
    np.testing.assert_allclose(again[n0:], np.array(got)[n0:], rtol=1e-6)
    assert np.all(again[:n0] == 0)


def test_rpn_target_assign_samples_labels_that_follow_the_overlaps():
    """use_random draws from spmd's generator (fluid's own engine cannot be matched; the
    use_random=False samples equal fluid 1.8.5's in test_ops_detection_roi_oracle.py): per
    image at most batch * fg_fraction foreground anchors, each a ground truth's best or over
    the positive overlap, background ones under the negative overlap, location targets that
    decode each foreground anchor into its ground truth, and the gathered prediction rows."""
    from spmd.kernels.detection_proposals import decode
    from spmd.kernels.detection_targets import overlaps

    anchors = np.array([[x, y, x + s - 1, y + s - 1] for y in range(0, 48, 8)
                        for x in range(0, 48, 8) for s in (8.0, 16.0)], "float32")
    gt = np.array([[3, 4, 18, 20], [24, 20, 44, 40], [8, 26, 22, 44]], "float32")
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = 4
    with fluid.program_guard(main, startup):
        logits = fluid.data("logits", [None, len(anchors)])
        deltas = fluid.data("deltas", [None, len(anchors) * 4])
        a = fluid.data("anchors", [len(anchors), 4])
        boxes = fluid.data("gt", [None, 4], lod_level=1)
        crowd = fluid.data("crowd", [None, 1], dtype="int32", lod_level=1)
        info = fluid.data("info", [None, 3])
        outs = fluid.layers.rpn_target_assign(deltas, logits, a, a, boxes, crowd, info,
                                              rpn_batch_size_per_im=20, rpn_fg_fraction=0.3,
                                              rpn_positive_overlap=0.6,
                                              rpn_negative_overlap=0.3)
        score_index = main.global_block().ops[0].output("ScoreIndex")[0]
    place = fluid.CPUPlace()
    feed = {"logits": RNG.uniform(-1, 1, (2, len(anchors))).astype("float32"),
            "deltas": RNG.uniform(-1, 1, (2, len(anchors) * 4)).astype("float32"),
            "anchors": anchors, "info": np.array([[48, 48, 1.0]] * 2, "float32"),
            "gt": fluid.create_lod_tensor(gt, [[2, 1]], place),
            "crowd": fluid.create_lod_tensor(np.zeros((3, 1), "int32"), [[2, 1]], place)}
    exe = fluid.Executor(place)
    got = exe.run(main, feed=feed, fetch_list=[*outs, score_index], return_numpy=False)
    score, loc, label, target, weight, index = got
    sizes = label.recursive_sequence_lengths()[0]
    label, index = np.array(label)[:, 0], np.array(index)
    np.testing.assert_array_equal(np.array(score)[:, 0], feed["logits"].reshape(-1)[index])
    start = 0
    for i, (n, image_gt) in enumerate(zip(sizes, (gt[:2], gt[2:]))):
        lab, idx = label[start:start + n], index[start:start + n] - i * len(anchors)
        ov = overlaps(anchors.astype(np.float64), image_gt.astype(np.float64))
        best = (np.abs(ov - ov.max(axis=0)) < 1e-5).any(axis=1)
        assert n <= 20 and 1 <= lab.sum() <= int(0.3 * 20)
        assert all(best[j] or ov[j].max() >= 0.6 for j in idx[lab == 1])
        assert all(ov[j].max() < 0.3 for j in idx[lab == 0])
        start += n
    fg = np.array(loc).shape[0]
    assert np.array(target).shape == (fg, 4) and np.array(weight).shape == (fg, 4)
    assert np.all(np.array(weight) == 1)
    # the targets decode each foreground anchor into the ground truth it overlaps most
    loc_index = np.nonzero(label == 1)[0]
    fg_anchor = anchors[index[loc_index] % len(anchors)].astype(np.float64)
    image_of = (index[loc_index] // len(anchors))
    decoded = decode(fg_anchor, np.array(target, np.float64), np.ones((fg, 4)))
    for row, (box, img) in enumerate(zip(decoded, image_of)):
        image_gt = gt[:2] if img == 0 else gt[2:]
        j = overlaps(fg_anchor[row:row + 1], image_gt.astype(np.float64)).argmax()
        np.testing.assert_allclose(box, image_gt[j], atol=1e-3)


def test_generate_proposal_labels_samples_and_targets():
    """use_random from spmd's generator (use_random=False equals fluid 1.8.5's, stored): per
    image at most batch_size_per_im rows, at most fg_fraction of them foreground; each
    foreground row overlaps its ground truth by >= fg_thresh and carries that box's class
    and, in that class's 4 columns only, the deltas (divided by bbox_reg_weights) that decode
    the row into the box; background rows overlap every box by < bg_thresh_hi and carry none.
    A crowd box is never a sample itself (a proposal may still match it, as in fluid)."""
    from spmd.kernels.detection_proposals import decode
    from spmd.kernels.detection_targets import overlaps

    gt = np.array([[2, 3, 20, 24], [30, 28, 56, 50], [8, 30, 40, 60]], "float32")
    classes = np.array([[1], [2], [3]], "int32")
    crowd = np.array([[0], [0], [1]], "int32")
    proposals = np.concatenate([gt + RNG.uniform(-3, 3, gt.shape),
                                RNG.uniform(0, 40, (10, 2)).repeat(2, axis=1)
                                + [0, 0, 12, 12]]).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = 9
    with fluid.program_guard(main, startup):
        names = ("rois", "classes", "crowd", "gt")
        v = [fluid.data(n, [None, 1 if n in ("classes", "crowd") else 4],
                        dtype="int32" if n in ("classes", "crowd") else "float32",
                        lod_level=1) for n in names]
        info = fluid.data("info", [None, 3])
        outs = fluid.layers.generate_proposal_labels(
            v[0], v[1], v[2], v[3], info, batch_size_per_im=8, fg_fraction=0.5,
            fg_thresh=0.5, class_nums=4, bbox_reg_weights=[0.1, 0.1, 0.2, 0.2])
    place = fluid.CPUPlace()
    feed = {"rois": fluid.create_lod_tensor(proposals, [[len(proposals)]], place),
            "classes": fluid.create_lod_tensor(classes, [[3]], place),
            "crowd": fluid.create_lod_tensor(crowd, [[3]], place),
            "gt": fluid.create_lod_tensor(gt, [[3]], place),
            "info": np.array([[64, 64, 1.0]], "float32")}
    rois, labels, targets, inside, outside = fluid.Executor(place).run(
        main, feed=feed, fetch_list=list(outs), return_numpy=False)
    assert rois.recursive_sequence_lengths() == labels.recursive_sequence_lengths()
    rois, labels = np.array(rois, np.float64), np.array(labels)[:, 0]
    targets, inside = np.array(targets, np.float64), np.array(inside)
    np.testing.assert_array_equal(inside, np.array(outside))
    assert len(rois) <= 8 and 1 <= (labels > 0).sum() <= 4
    ov = overlaps(rois, gt.astype(np.float64))
    assert not any(np.allclose(r, gt[2]) for r in rois)  # the crowd box is no sample
    for row, (box, label) in enumerate(zip(rois, labels)):
        cols = np.nonzero(inside[row])[0]
        if label == 0:
            assert ov[row].max() < 0.5 and cols.size == 0
            continue
        j = int(ov[row].argmax())
        assert ov[row, j] >= 0.5 and label == classes[j, 0]
        np.testing.assert_array_equal(cols, np.arange(4 * label, 4 * label + 4))
        back = decode(box[None], targets[row:row + 1, cols], np.array([[0.1, 0.1, 0.2, 0.2]]))
        np.testing.assert_allclose(back[0], gt[j], atol=1e-3)


def test_retinanet_target_assign_labels_anchors_with_their_boxes_class():
    anchors = np.array([[x, y, x + s - 1, y + s - 1] for y in range(0, 40, 8)
                        for x in range(0, 40, 8) for s in (8.0, 16.0)], "float32")
    gt = np.array([[3, 4, 18, 20], [20, 18, 36, 38]], "float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        logits = fluid.data("logits", [None, len(anchors) * 3])
        deltas = fluid.data("deltas", [None, len(anchors) * 4])
        a = fluid.data("anchors", [len(anchors), 4])
        boxes = fluid.data("gt", [None, 4], lod_level=1)
        labels = fluid.data("labels", [None, 1], dtype="int32", lod_level=1)
        crowd = fluid.data("crowd", [None, 1], dtype="int32", lod_level=1)
        info = fluid.data("info", [None, 3])
        outs = fluid.layers.retinanet_target_assign(deltas, logits, a, a, boxes, labels, crowd,
                                                    info, num_classes=3)
    place = fluid.CPUPlace()
    lod = [[2]]
    feed = {"logits": RNG.uniform(-1, 1, (1, len(anchors) * 3)).astype("float32"),
            "deltas": RNG.uniform(-1, 1, (1, len(anchors) * 4)).astype("float32"),
            "anchors": anchors, "info": np.array([[40, 40, 1.0]], "float32"),
            "gt": fluid.create_lod_tensor(gt, lod, place),
            "labels": fluid.create_lod_tensor(np.array([[2], [3]], "int32"), lod, place),
            "crowd": fluid.create_lod_tensor(np.zeros((2, 1), "int32"), lod, place)}
    score, loc, label, target, weight, fg_num = (np.array(t) for t in fluid.Executor(
        place).run(main, feed=feed, fetch_list=list(outs)))
    from spmd.kernels.detection_targets import overlaps

    ov = overlaps(anchors.astype(np.float64), gt.astype(np.float64))
    state = np.full(len(anchors), -1)
    state[(np.abs(ov - ov.max(axis=0)) < 1e-5).any(axis=1) | (ov.max(axis=1) >= 0.5)] = 1
    state[ov.max(axis=1) < 0.4] = 0  # background wins over a box's best anchor, as in fluid
    fg, bg = np.nonzero(state == 1)[0], np.nonzero(state == 0)[0]
    assert score.shape == (len(fg) + len(bg), 3) and len(fg) >= 2
    want = np.concatenate([np.array([2, 3])[ov[fg].argmax(axis=1)], np.zeros(len(bg), int)])
    np.testing.assert_array_equal(label[:, 0], want)
    np.testing.assert_array_equal(score, feed["logits"].reshape(-1, 3)[np.concatenate([fg, bg])])
    assert fg_num.tolist() == [[len(fg) + 1]] and target.shape == weight.shape
    assert loc.shape == (len(target), 4) and weight.sum() == 4 * len(fg)


def test_retinanet_detection_output_rows_per_image():
    """Two levels through the layer: per image at most keep_top_k rows, by score, labels
    1..C, boxes inside the original image (im_info's size / scale), and no two of one class
    overlapping more than nms_threshold."""
    n, c, sizes = 2, 3, (12, 5)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        b = [fluid.data(f"b{i}", [None, m, 4]) for i, m in enumerate(sizes)]
        s = [fluid.data(f"s{i}", [None, m, c]) for i, m in enumerate(sizes)]
        a = [fluid.data(f"a{i}", [m, 4]) for i, m in enumerate(sizes)]
        info = fluid.data("info", [None, 3])
        out = fluid.layers.retinanet_detection_output(b, s, a, info, score_threshold=0.2,
                                                      nms_top_k=20, keep_top_k=7,
                                                      nms_threshold=0.3)
    feed = {"info": np.array([[64, 64, 1.0], [80, 60, 2.0]], "float32")}
    for i, m in enumerate(sizes):
        xy = RNG.uniform(0, 50, (m, 2))
        feed[f"a{i}"] = np.concatenate([xy, xy + RNG.uniform(8, 20, (m, 2))], 1).astype(
            "float32")
        feed[f"b{i}"] = RNG.uniform(-0.2, 0.2, (n, m, 4)).astype("float32")
        feed[f"s{i}"] = RNG.uniform(0, 1, (n, m, c)).astype("float32")
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[out],
                                                  return_numpy=False)
    rows, start = np.array(got), 0
    for i, count in enumerate(got.recursive_sequence_lengths()[0]):
        dets = rows[start:start + count]
        start += count
        assert 1 <= count <= 7
        assert np.all(np.diff(dets[:, 1]) <= 0) and set(dets[:, 0]) <= {1.0, 2.0, 3.0}
        h, w, scale = feed["info"][i]
        assert dets[:, 2:].min() >= 0 and dets[:, [2, 4]].max() <= round(w / scale) - 1
        assert dets[:, [3, 5]].max() <= round(h / scale) - 1
        for label in set(dets[:, 0]):
            same = dets[dets[:, 0] == label, 2:]
            for p in range(len(same)):
                for q in range(p):
                    assert iou_pixels(same[p], same[q]) <= 0.3 + 1e-6


def test_polygon_iou_of_known_shapes():
    from spmd.kernels.detection_polygon import polygon_iou

    square = [0, 0, 2, 0, 2, 2, 0, 2]
    np.testing.assert_allclose(polygon_iou(square, [1, 0, 3, 0, 3, 2, 1, 2]), 2 / 6)
    np.testing.assert_allclose(polygon_iou(square, [0, 2, 2, 2, 2, 0, 0, 0]), 1.0)  # winding
    diamond = [1, -1, 3, 1, 1, 3, -1, 1]  # area 8; overlaps the square in all of it
    np.testing.assert_allclose(polygon_iou(square, diamond), 4 / 8)
    assert polygon_iou(square, [5, 5, 6, 5, 6, 6, 5, 6]) == 0.0


def test_locality_aware_nms_merges_neighbours_then_suppresses():
    """Three overlapping quads in a row merge into one (scores added, coordinates weighted by
    score); a far one stays; below score_threshold nothing survives ([[-1]])."""
    quads = np.array([[[0, 0, 10, 0, 10, 10, 0, 10], [1, 0, 11, 0, 11, 10, 1, 10],
                       [2, 0, 12, 0, 12, 10, 2, 10], [40, 40, 50, 40, 50, 50, 40, 50]]],
                     "float32")
    scores = np.array([[[0.5, 0.3, 0.2, 0.6]]], "float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        b = fluid.data("b", [None, 4, 8])
        s = fluid.data("s", [None, 1, 4])
        out = fluid.layers.locality_aware_nms(b, s, 0.1, 10, -1, nms_threshold=0.5,
                                              normalized=False)
        none = fluid.layers.locality_aware_nms(b, s, 5.0, 10, -1, normalized=False)
    got, empty = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"b": quads, "s": scores}, fetch_list=[out, none], return_numpy=False)
    rows = np.array(got)
    assert got.recursive_sequence_lengths() == [[2]]
    merged = rows[np.argmax(rows[:, 1])]
    np.testing.assert_allclose(merged[1], 1.0, rtol=1e-6)  # 0.5 + 0.3 + 0.2
    first = (quads[0, 0] * 0.5 + quads[0, 1] * 0.3) / 0.8
    np.testing.assert_allclose(merged[2:], (first * 0.8 + quads[0, 2] * 0.2) / 1.0, rtol=1e-5)
    np.testing.assert_allclose(rows[np.argmin(rows[:, 1]), 2:], quads[0, 3])
    assert np.array(empty).tolist() == [[-1.0]]


def test_poly_to_mask_fills_the_polygon():
    """COCO's rasterization: a pixel is in when its centre is inside (an axis-aligned
    rectangle over pixel edges fills exactly its pixels); a triangle keeps to its half."""
    from spmd.kernels.detection_masks import poly_to_mask

    rect = poly_to_mask([1, 2, 5, 2, 5, 6, 1, 6], 8, 8)
    want = np.zeros((8, 8), np.uint8)
    want[2:6, 1:5] = 1
    np.testing.assert_array_equal(rect, want)
    tri = poly_to_mask([0, 0, 8, 0, 0, 8], 8, 8)
    rows, cols = np.nonzero(tri)
    assert tri.sum() in range(28, 38) and np.all(rows + cols <= 8)


def test_generate_mask_labels_rasterizes_in_the_class_column():
    """A foreground ROI equal to a square box's bounds gets an all-ones mask in its class's
    column and -1 in the others; background ROIs get no row."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        info = fluid.data("info", [None, 3])
        classes = fluid.data("classes", [None, 1], dtype="int32", lod_level=1)
        crowd = fluid.data("crowd", [None, 1], dtype="int32", lod_level=1)
        segms = fluid.data("segms", [None, 2], lod_level=3)
        rois = fluid.data("rois", [None, 4], lod_level=1)
        labels = fluid.data("labels", [None, 1], dtype="int32", lod_level=1)
        outs = fluid.layers.generate_mask_labels(info, classes, crowd, segms, rois, labels,
                                                 num_classes=3, resolution=4)
    place = fluid.CPUPlace()
    square = np.array([[8, 8], [24, 8], [24, 24], [8, 24]], "float32")
    feed = {"info": np.array([[32, 32, 1.0]], "float32"),
            "classes": fluid.create_lod_tensor(np.array([[2]], "int32"), [[1]], place),
            "crowd": fluid.create_lod_tensor(np.array([[0]], "int32"), [[1]], place),
            "segms": fluid.create_lod_tensor(square, [[1], [1], [4]], place),
            "rois": fluid.create_lod_tensor(np.array([[8, 8, 24, 24], [0, 0, 5, 5]],
                                                     "float32"), [[2]], place),
            "labels": fluid.create_lod_tensor(np.array([[2], [0]], "int32"), [[2]], place)}
    mask_rois, has_mask, masks = (np.array(t) for t in fluid.Executor(place).run(
        main, feed=feed, fetch_list=list(outs)))
    np.testing.assert_array_equal(mask_rois, [[8, 8, 24, 24]])
    assert has_mask.tolist() == [[0]]
    target = masks.reshape(3, 16)
    assert np.all(target[2] == 1) and np.all(target[:2] == -1)
