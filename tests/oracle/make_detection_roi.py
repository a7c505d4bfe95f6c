"""Outputs of fluid 1.8's YOLO, ROI and proposal ops on fixed inputs, for
tests/unit/test_ops_detection_roi*.py; and the first losses of examples/detection/yolov3_tiny.py
run in fluid from the same parameters and data. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_detection_roi.py

Every case stores its inputs (made here from fixed seeds), its attributes, the outputs fluid
fetched (with their LoD, as recursive sequence lengths) and, where the op has a gradient,
d(sum(out * W)) / d input for a stored weight W.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples",
                                "detection"))

R = np.random.RandomState(22)


def _rois(n_per_image, h, w, scale=1.0):
    """[sum(n), 4] boxes (x1, y1, x2, y2) in input pixels, inside an h x w map / scale."""
    rows = []
    for _ in range(sum(n_per_image)):
        x1, y1 = R.uniform(0, w / scale * 0.6), R.uniform(0, h / scale * 0.6)
        x2 = x1 + R.uniform(1.0, w / scale * 0.4)
        y2 = y1 + R.uniform(1.0, h / scale * 0.4)
        rows.append([x1, y1, x2, y2])
    return np.array(rows, "float32")


def _gt_boxes(n, b, valid):
    """[n, b, 4] centre-size boxes in [0, 1], rows past `valid[i]` zero (padding)."""
    box = np.zeros((n, b, 4), "float32")
    for i in range(n):
        for t in range(valid[i]):
            cx, cy = R.uniform(0.1, 0.9, 2)
            bw, bh = R.uniform(0.05, 0.6, 2)
            box[i, t] = [cx, cy, bw, bh]
    return box


def yolo_cases():
    cases = {}
    x = R.uniform(-2, 2, (2, 3 * 7, 4, 4)).astype("float32")
    img = np.array([[64, 64], [48, 56]], "int32")
    for clip, sxy in ((True, 1.0), (False, 1.0), (True, 1.2)):
        cases[f"yolo_box_clip{clip:d}_s{sxy:.1f}"] = {
            "op": "yolo_box", "inputs": {"X": x, "ImgSize": img},
            "attrs": {"anchors": [10, 13, 16, 30, 33, 23], "class_num": 2,
                      "conf_thresh": 0.3, "downsample_ratio": 16, "clip_bbox": clip,
                      "scale_x_y": sxy},
            "outputs": ["Boxes", "Scores"]}
    anchors = [10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119, 116, 90, 156, 198, 373, 326]
    xl = R.uniform(-1.5, 1.5, (2, 3 * 8, 4, 4)).astype("float32")
    box = _gt_boxes(2, 5, [4, 3])
    label = R.randint(0, 3, (2, 5)).astype("int32")
    score = R.uniform(0.3, 1.0, (2, 5)).astype("float32")
    for smooth, with_score, mask, thresh, sxy in (
            (True, False, [3, 4, 5], 0.5, 1.0), (False, False, [3, 4, 5], 0.5, 1.0),
            (True, True, [0, 1, 2], 0.7, 1.0), (False, True, [6, 7, 8], 0.3, 1.0),
            (True, True, [3, 4, 5], 0.5, 1.1)):
        inputs = {"X": xl, "GTBox": box, "GTLabel": label}
        if with_score:
            inputs["GTScore"] = score
        name = f"yolov3_loss_ls{smooth:d}_sc{with_score:d}_m{mask[0]:d}_s{sxy:.1f}"
        cases[name] = {
            "op": "yolov3_loss", "inputs": inputs,
            "attrs": {"anchors": anchors, "anchor_mask": mask, "class_num": 3,
                      "ignore_thresh": thresh, "downsample_ratio": 32,
                      "use_label_smooth": smooth, "scale_x_y": sxy},
            "outputs": ["Loss", "ObjectnessMask", "GTMatchMask"], "grad": ["X"],
            "grad_of": ["Loss"]}
    # two boxes of one shape whose centres share a cell: fluid's gradient there is the last's
    cases["yolov3_loss_two_in_one_cell"] = {
        "op": "yolov3_loss",
        "inputs": {"X": R.uniform(-1.5, 1.5, (1, 24, 4, 4)).astype("float32"),
                   "GTBox": np.array([[[0.30, 0.30, 0.30, 0.45], [0.40, 0.35, 0.31, 0.44]]],
                                     "float32"),
                   "GTLabel": np.array([[0, 2]], "int32"),
                   "GTScore": np.array([[0.9, 0.6]], "float32")},
        "attrs": {"anchors": anchors, "anchor_mask": [3, 4, 5], "class_num": 3,
                  "ignore_thresh": 0.5, "downsample_ratio": 32, "use_label_smooth": True,
                  "scale_x_y": 1.0},
        "outputs": ["Loss", "ObjectnessMask", "GTMatchMask"], "grad": ["X"],
        "grad_of": ["Loss"]}
    return cases


def roi_cases():
    cases = {}
    x = R.uniform(-1, 1, (2, 3, 6, 7)).astype("float32")
    rois = _rois([2, 2], 6, 7)
    lod = {"ROIs": [[2, 2]]}
    for ratio, scale in ((-1, 1.0), (2, 1.0), (-1, 0.5)):
        r = rois / scale if scale != 1.0 else rois
        cases[f"roi_align_r{ratio:d}_s{scale:.1f}"] = {
            "op": "roi_align", "inputs": {"X": x, "ROIs": r}, "lod": lod,
            "attrs": {"pooled_height": 2, "pooled_width": 3, "spatial_scale": scale,
                      "sampling_ratio": ratio},
            "outputs": ["Out"], "grad": ["X"], "grad_of": ["Out"]}
    for scale in (1.0, 0.5):
        r = rois / scale if scale != 1.0 else rois
        cases[f"roi_pool_s{scale:.1f}"] = {
            "op": "roi_pool", "inputs": {"X": x, "ROIs": r}, "lod": lod,
            "attrs": {"pooled_height": 2, "pooled_width": 2, "spatial_scale": scale},
            "outputs": ["Out", "Argmax"], "grad": ["X"], "grad_of": ["Out"]}
    xp = R.uniform(-1, 1, (2, 8, 6, 6)).astype("float32")
    prois = _rois([1, 2], 6, 6)
    cases["psroi_pool"] = {
        "op": "psroi_pool", "inputs": {"X": xp, "ROIs": prois}, "lod": {"ROIs": [[1, 2]]},
        "attrs": {"output_channels": 2, "spatial_scale": 1.0, "pooled_height": 2,
                  "pooled_width": 2},
        "outputs": ["Out"], "grad": ["X"], "grad_of": ["Out"]}
    for scale in (1.0, 0.5):
        r = prois / scale if scale != 1.0 else prois
        cases[f"prroi_pool_s{scale:.1f}"] = {
            "op": "prroi_pool", "inputs": {"X": xp[:, :3], "ROIs": r},
            "lod": {"ROIs": [[1, 2]]},
            "attrs": {"spatial_scale": scale, "pooled_height": 2, "pooled_width": 3},
            "outputs": ["Out"], "grad": ["X", "ROIs"], "grad_of": ["Out"]}
    # deformable_psroi_pooling: plain (input channels = output) and position-sensitive
    xd = R.uniform(-1, 1, (2, 8, 7, 7)).astype("float32")
    drois = _rois([2, 1], 7, 7)
    for name, extra in (
            ("deformable_roi_pooling", {"output_dim": 8, "group_size": [1, 1],
                                        "no_trans": False}),
            ("deformable_roi_pooling_ps", {"output_dim": 2, "group_size": [2, 2],
                                           "no_trans": False}),
            ("deformable_roi_pooling_no_trans", {"output_dim": 8, "group_size": [1, 1],
                                                 "no_trans": True})):
        attrs = {"spatial_scale": 1.0, "pooled_height": 2, "pooled_width": 2,
                 "part_size": [2, 2], "sample_per_part": 2, "trans_std": 0.1}
        attrs.update(extra)
        classes = 1 if extra["output_dim"] == 8 else 2
        trans = R.uniform(-1, 1, (3, 2 * classes, 2, 2)).astype("float32")
        cases[name] = {
            "op": "deformable_psroi_pooling",
            "inputs": {"Input": xd, "ROIs": drois, "Trans": trans}, "lod": {"ROIs": [[2, 1]]},
            "attrs": attrs, "outputs": ["Output", "TopCount"],
            "grad": ["Input"] if extra["no_trans"] else ["Input", "Trans"],
            "grad_of": ["Output"]}
    # roi_perspective_transform: quadrilaterals (x0, y0, ..., x3, y3), one reaching past the map
    quads = np.array([[1.0, 1.2, 6.3, 0.8, 6.8, 4.9, 0.6, 5.3],
                      [2.2, 0.5, 8.5, 2.0, 7.9, 6.6, 1.4, 5.1],
                      [-1.5, 3.0, 5.0, 2.0, 9.5, 7.5, 0.5, 8.0]], "float32")
    for name, scale in (("roi_perspective_transform", 1.0),
                        ("roi_perspective_transform_scaled", 0.5)):
        cases[name] = {
            "op": "roi_perspective_transform",
            "inputs": {"X": R.uniform(-1, 1, (2, 2, 7, 8)).astype("float32"),
                       "ROIs": quads / scale}, "lod": {"ROIs": [[2, 1]]},
            "attrs": {"transformed_height": 4, "transformed_width": 5, "spatial_scale": scale},
            "outputs": ["Out", "Mask", "TransformMatrix", "Out2InIdx", "Out2InWeights"],
            "grad": ["X"], "grad_of": ["Out"]}
    return cases


def box_cases():
    cases = {}
    cases["anchor_generator"] = {
        "op": "anchor_generator", "inputs": {"Input": np.zeros((1, 4, 3, 5), "float32")},
        "attrs": {"anchor_sizes": [32.0, 64.0], "aspect_ratios": [0.5, 1.0, 2.0],
                  "variances": [0.1, 0.1, 0.2, 0.2], "stride": [16.0, 12.0], "offset": 0.5},
        "outputs": ["Anchors", "Variances"]}
    n, cls = 5, 3
    prior = np.sort(R.uniform(0, 40, (n, 4)).reshape(n, 2, 2), axis=1).transpose(
        0, 2, 1).reshape(n, 4).astype("float32")
    prior = prior[:, [0, 2, 1, 3]]
    cases["box_decoder_and_assign"] = {
        "op": "box_decoder_and_assign",
        "inputs": {"PriorBox": prior,
                   "PriorBoxVar": np.array([0.1, 0.1, 0.2, 0.2], "float32"),
                   "TargetBox": R.uniform(-1, 1, (n, cls * 4)).astype("float32"),
                   "BoxScore": R.uniform(0, 1, (n, cls)).astype("float32")},
        "attrs": {"box_clip": 2.0}, "outputs": ["DecodeBox", "OutputAssignBox"]}
    cases["polygon_box_transform"] = {
        "op": "polygon_box_transform",
        "inputs": {"Input": R.uniform(-3, 3, (2, 8, 3, 4)).astype("float32")},
        "attrs": {}, "outputs": ["Output"]}
    return cases


def run_case(fluid, case):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        ins, feed = {}, {}
        for slot, a in case["inputs"].items():
            lod = case.get("lod", {}).get(slot)
            v = block.create_var(name="in_" + slot, shape=a.shape, dtype=a.dtype.name,
                                 lod_level=len(lod) if lod else 0)
            v.stop_gradient = slot not in case.get("grad", [])
            v.is_data = True
            ins[slot] = v
            if lod:
                feed[v.name] = fluid.create_lod_tensor(a, lod, fluid.CPUPlace())
            else:
                feed[v.name] = a
        outs = {s: block.create_var(name="out_" + s, dtype="float32") for s in case["outputs"]}
        block.append_op(type=case["op"], inputs={k: [v] for k, v in ins.items()},
                        outputs={k: [v] for k, v in outs.items()},
                        attrs=dict(case["attrs"]))
        fetch = [outs[s] for s in case["outputs"]]
        forward = main.clone()
        weights = {}
        if case.get("grad"):
            terms = []
            for s in case["grad_of"]:
                w = block.create_var(name="w_" + s, dtype="float32", shape=[-1])
                w.is_data = True
                weights[s] = w
                terms.append(fluid.layers.reduce_sum(outs[s] * w))
            loss = terms[0] if len(terms) == 1 else fluid.layers.sums(terms)
            fluid.backward.append_backward(loss)
            fetch += [block.var("in_" + s + "@GRAD") for s in case["grad"]]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    if weights:
        shapes = [np.array(t).shape for t in exe.run(forward, feed=feed, fetch_list=[
            "out_" + s for s in case["outputs"]], return_numpy=False)]
        for s, w in weights.items():
            shp = shapes[case["outputs"].index(s)]
            case.setdefault("weights", {})[s] = R.uniform(0.5, 1.5, shp).astype("float32")
            feed[w.name] = case["weights"][s]
    got = exe.run(main, feed=feed, fetch_list=fetch, return_numpy=False)
    result = {}
    for s, t in zip(case["outputs"], got):
        result[s] = np.array(t)
        if t.recursive_sequence_lengths():
            result[s + "@LOD"] = t.recursive_sequence_lengths()
    for s, t in zip(case.get("grad", []), got[len(case["outputs"]):]):
        result[s + "@GRAD"] = np.array(t)
    case["expected"] = result
    return case


def _boxes(count, scale_lo, scale_hi):
    """[count, 4] (x1, y1, x2, y2) of square-ish boxes whose sides span scale_lo..scale_hi."""
    side = np.exp(R.uniform(np.log(scale_lo), np.log(scale_hi), count))
    x1, y1 = R.uniform(0, 300, count), R.uniform(0, 300, count)
    aspect = R.uniform(0.7, 1.4, count)
    return np.stack([x1, y1, x1 + side * aspect, y1 + side / aspect], 1).astype("float32")


def proposal_cases():
    """Ops with duplicable slots and LoD outputs: every input and output slot a list."""
    cases = {}
    n, a, h, w = 2, 3, 4, 5
    anchors = np.zeros((h, w, a, 4), "float32")
    for k in range(h):
        for col in range(w):
            for j, side in enumerate((8.0, 14.0, 22.0)):
                cx, cy = col * 12 + 6, k * 12 + 6
                anchors[k, col, j] = [cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2]
    variances = np.tile(np.array([0.1, 0.1, 0.2, 0.2], "float32"), (h, w, a, 1))
    base = {"Scores": [R.uniform(0, 1, (n, a, h, w)).astype("float32")],
            "BboxDeltas": [R.uniform(-1.5, 1.5, (n, 4 * a, h, w)).astype("float32")],
            "Anchors": [anchors], "Variances": [variances]}
    for name, info, attrs in (
            ("generate_proposals", [[50, 60, 1.0], [44, 52, 1.0]],
             {"pre_nms_topN": 30, "post_nms_topN": 12, "nms_thresh": 0.5, "min_size": 2.0,
              "eta": 1.0}),
            ("generate_proposals_scaled_eta", [[50, 60, 2.0], [44, 52, 1.5]],
             {"pre_nms_topN": 50, "post_nms_topN": 20, "nms_thresh": 0.8, "min_size": 3.0,
              "eta": 0.9}),
            ("generate_proposals_all", [[50, 60, 1.0], [30, 30, 1.0]],
             {"pre_nms_topN": -1, "post_nms_topN": -1, "nms_thresh": 0.6, "min_size": 0.5,
              "eta": 1.0})):
        ins = dict(base, ImInfo=[np.array(info, "float32")])
        cases[name] = {"op": "generate_proposals", "inputs": ins, "attrs": attrs,
                       "outputs": {"RpnRois": 1, "RpnRoiProbs": 1, "RpnRoisLod": 1}}
    rois = _boxes(9, 8, 500)
    for name, attrs in (("distribute_fpn_proposals", (2, 5, 4, 224)),
                        ("distribute_fpn_proposals_narrow", (3, 4, 4, 100))):
        lo, hi, ref_level, ref_scale = attrs
        cases[name] = {"op": "distribute_fpn_proposals", "inputs": {"FpnRois": [rois]},
                       "lod": {"FpnRois": [[[5, 4]]]},
                       "attrs": {"min_level": lo, "max_level": hi, "refer_level": ref_level,
                                 "refer_scale": ref_scale},
                       "outputs": {"MultiFpnRois": hi - lo + 1, "RestoreIndex": 1}}
    levels = [_boxes(5, 8, 60), _boxes(4, 30, 200), _boxes(3, 100, 400)]
    lods = [[[3, 2]], [[1, 3]], [[2, 1]]]
    scores = [R.uniform(0, 1, (len(b), 1)).astype("float32") for b in levels]
    for name, top in (("collect_fpn_proposals", 6), ("collect_fpn_proposals_all", 100)):
        cases[name] = {"op": "collect_fpn_proposals",
                       "inputs": {"MultiLevelRois": levels, "MultiLevelScores": scores},
                       "lod": {"MultiLevelRois": lods, "MultiLevelScores": lods},
                       "attrs": {"post_nms_topN": top}, "outputs": {"FpnRois": 1}}
    # RPN targets: anchors on a 5 x 5 grid, 2 images of ground truth (one crowd box)
    grid = np.array([[x, y, x + side - 1, y + side - 1] for y in range(0, 60, 12)
                     for x in range(0, 60, 12) for side in (12.0, 24.0)], "float32")
    gt = np.array([[2, 3, 20, 24], [30, 28, 56, 50], [10, 36, 30, 58],
                   [5, 5, 40, 40], [26, 2, 50, 20]], "float32")
    crowd = np.array([[0], [0], [1], [0], [0]], "int32")
    rpn = {"Anchor": [grid], "GtBoxes": [gt], "IsCrowd": [crowd],
           "ImInfo": [np.array([[60, 60, 1.0], [50, 64, 1.0]], "float32")]}
    rpn_lod = {"GtBoxes": [[[3, 2]]], "IsCrowd": [[[3, 2]]]}
    rpn_out = {"LocationIndex": 1, "ScoreIndex": 1, "TargetBBox": 1, "TargetLabel": 1,
               "BBoxInsideWeight": 1}
    for name, attrs in (
            ("rpn_target_assign", {"rpn_batch_size_per_im": 16, "rpn_straddle_thresh": 0.0,
                                   "rpn_positive_overlap": 0.7, "rpn_negative_overlap": 0.3,
                                   "rpn_fg_fraction": 0.25, "use_random": False}),
            ("rpn_target_assign_all", {"rpn_batch_size_per_im": 512,
                                       "rpn_straddle_thresh": -1.0,
                                       "rpn_positive_overlap": 0.5,
                                       "rpn_negative_overlap": 0.2, "rpn_fg_fraction": 0.5,
                                       "use_random": False})):
        if name.endswith("_all"):  # an image scaled: its ground truth is scaled too
            rpn = dict(rpn, ImInfo=[np.array([[60, 60, 1.5], [50, 64, 1.0]], "float32")])
        cases[name] = {"op": "rpn_target_assign", "inputs": rpn, "lod": rpn_lod,
                       "attrs": attrs, "outputs": rpn_out}
    retina = dict(rpn, GtLabels=[np.array([[1], [3], [2], [2], [1]], "int32")])
    cases["retinanet_target_assign"] = {
        "op": "retinanet_target_assign", "inputs": retina,
        "lod": dict(rpn_lod, GtLabels=[[[3, 2]]]),
        "attrs": {"positive_overlap": 0.5, "negative_overlap": 0.4},
        "outputs": dict(rpn_out, ForegroundNumber=1)}
    # RetinaNet inference over 2 levels: decode, per-class NMS, keep_top_k per image
    sizes = (8, 4)
    ret_anchors = [_boxes(m, 6, s * 4.0) * 0.2 for m, s in zip(sizes, (3, 6))]
    cases["retinanet_detection_output"] = {
        "op": "retinanet_detection_output",
        "inputs": {"BBoxes": [R.uniform(-0.3, 0.3, (2, m, 4)).astype("float32") for m in sizes],
                   "Scores": [R.uniform(0, 1, (2, m, 3)).astype("float32") for m in sizes],
                   "Anchors": ret_anchors,
                   "ImInfo": [np.array([[64, 64, 1.0], [96, 80, 1.5]], "float32")]},
        "attrs": {"score_threshold": 0.3, "nms_top_k": 10, "keep_top_k": 9,
                  "nms_threshold": 0.4, "nms_eta": 1.0},
        "outputs": {"Out": 1}}
    # EAST's locality-aware NMS over quadrilaterals: neighbours merged, then NMS per class
    quads = []
    for _ in range(7):
        cx, cy = R.uniform(10, 30, 2)
        w, h = R.uniform(6, 14, 2)
        quads.append([cx - w, cy - h, cx + w, cy - h + 1, cx + w - 1, cy + h, cx - w + 1, cy + h])
    quads = np.array(quads, "float32")
    quads = np.concatenate([quads, quads[[1, 3]] + R.uniform(-1, 1, (2, 8))]).astype("float32")
    for name, extra in (("locality_aware_nms", {"background_label": -1, "keep_top_k": -1}),
                        ("locality_aware_nms_keep", {"background_label": 0, "keep_top_k": 4})):
        attrs = {"score_threshold": 0.2, "nms_top_k": 10, "nms_threshold": 0.3,
                 "nms_eta": 1.0, "normalized": False}
        attrs.update(extra)
        cases[name] = {"op": "locality_aware_nms",
                       "inputs": {"BBoxes": [np.stack([quads, quads[::-1]])],
                                  "Scores": [R.uniform(0, 1, (2, 3, len(quads))).astype(
                                      "float32")]},
                       "attrs": attrs, "outputs": {"Out": 1}}
    # Mask R-CNN targets: polygons per ground truth (one with two parts), rasterized in each
    # foreground ROI; the second image has no foreground (fluid's placeholder row)
    polys = [[[4, 4, 20, 5, 18, 22, 6, 18]], [[30, 30, 50, 28, 52, 46, 34, 50, 28, 40]],
             [[8, 30, 16, 30, 16, 40], [18, 34, 24, 34, 24, 44, 18, 44]], [[2, 2, 12, 2, 7, 12]]]
    points = np.array([v for g in polys for p in g for v in p], "float32").reshape(-1, 2)
    segm_lod = [[3, 1], [len(g) for g in polys], [len(p) // 2 for g in polys for p in g]]
    mask_rois = np.array([[3, 3, 21, 23], [28, 26, 54, 52], [6, 28, 26, 46], [1, 1, 30, 30],
                          [0, 0, 15, 15], [3, 3, 13, 13]], "float32")
    cases["generate_mask_labels"] = {
        "op": "generate_mask_labels",
        "inputs": {"ImInfo": [np.array([[64, 64, 1.0], [40, 40, 2.0]], "float32")],
                   "GtClasses": [np.array([[1], [2], [3], [1]], "int32")],
                   "IsCrowd": [np.array([[0], [0], [0], [0]], "int32")],
                   "GtSegms": [points], "Rois": [mask_rois * np.array(
                       [[1], [1], [1], [1], [2], [2]], "float32")],
                   "LabelsInt32": [np.array([[1], [2], [3], [0], [0], [0]], "int32")]},
        "lod": {"GtClasses": [[[3, 1]]], "IsCrowd": [[[3, 1]]], "GtSegms": [segm_lod],
                "Rois": [[[4, 2]]], "LabelsInt32": [[[4, 2]]]},
        "attrs": {"num_classes": 4, "resolution": 7},
        "outputs": {"MaskRois": 1, "RoiHasMaskInt32": 1, "MaskInt32": 1}}
    # Fast R-CNN sampling: proposals (in the scaled image) around the ground truth, and others
    jitter = np.concatenate([gt + R.uniform(-4, 4, gt.shape), gt + R.uniform(-9, 9, gt.shape),
                             _boxes(6, 6, 30)]).astype("float32")
    jitter[:, 2:] = np.maximum(jitter[:, 2:], jitter[:, :2] + 2)
    lab = {"RpnRois": [np.concatenate([jitter[[0, 1, 2, 5, 6, 7, 10, 11, 12]] * 1.5,
                                       jitter[[3, 4, 8, 9, 13, 14, 15]]]).astype("float32")],
           "GtClasses": [np.array([[1], [3], [2], [2], [1]], "int32")],
           "IsCrowd": [crowd], "GtBoxes": [gt],
           "ImInfo": [np.array([[90, 90, 1.5], [50, 64, 1.0]], "float32")]}
    lab_lod = {"RpnRois": [[[9, 7]]], "GtClasses": [[[3, 2]]], "IsCrowd": [[[3, 2]]],
               "GtBoxes": [[[3, 2]]]}
    lab_out = {"Rois": 1, "LabelsInt32": 1, "BboxTargets": 1, "BboxInsideWeights": 1,
               "BboxOutsideWeights": 1}
    for name, extra in (("generate_proposal_labels", {}),
                        ("generate_proposal_labels_agnostic_few",
                         {"is_cls_agnostic": True, "batch_size_per_im": 6,
                          "fg_fraction": 0.5})):
        attrs = {"batch_size_per_im": 32, "fg_fraction": 0.25, "fg_thresh": 0.5,
                 "bg_thresh_hi": 0.5, "bg_thresh_lo": 0.0,
                 "bbox_reg_weights": [0.1, 0.1, 0.2, 0.2], "class_nums": 4,
                 "use_random": False, "is_cls_agnostic": False, "is_cascade_rcnn": False}
        attrs.update(extra)
        cases[name] = {"op": "generate_proposal_labels", "inputs": lab, "lod": lab_lod,
                       "attrs": attrs, "outputs": lab_out}
    return cases


def run_multi_case(fluid, case):
    """A case whose slots are lists (duplicable); outputs: slot -> count. Stores every output
    (a list per slot) and the LoD of each (recursive sequence lengths, or None)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        ins, feed = {}, {}
        for slot, arrays in case["inputs"].items():
            lods = case.get("lod", {}).get(slot) or [None] * len(arrays)
            ins[slot] = []
            for i, (a, lod) in enumerate(zip(arrays, lods)):
                v = block.create_var(name=f"in_{slot}_{i}", shape=a.shape,
                                     dtype=a.dtype.name, lod_level=len(lod) if lod else 0)
                v.is_data = True
                ins[slot].append(v)
                feed[v.name] = fluid.create_lod_tensor(a, lod, fluid.CPUPlace()) if lod else a
        outs = {s: [block.create_var(name=f"out_{s}_{i}", dtype="float32")
                    for i in range(k)] for s, k in case["outputs"].items()}
        block.append_op(type=case["op"], inputs=ins, outputs=outs, attrs=dict(case["attrs"]))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    fetch = [v for s in case["outputs"] for v in outs[s]]
    got = iter(exe.run(main, feed=feed, fetch_list=fetch, return_numpy=False))
    result = {}
    for s, k in case["outputs"].items():
        tensors = [next(got) for _ in range(k)]
        result[s] = [np.array(t) for t in tensors]
        result[s + "@LOD"] = [t.recursive_sequence_lengths() or None for t in tensors]
    case["expected"] = result
    return case


EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "detection",
                       "yolov3_tiny.py")
YOLOV3_STEPS = 4


def example_in(framework):
    """examples/detection/yolov3_tiny.py as a module whose imports name `framework`'s fluid
    ("paddle" here, "spmd" as written): the one line that differs between the two."""
    import types

    with open(EXAMPLE) as f:
        src = f.read()
    if framework != "spmd":
        src = src.replace("import spmd.fluid as fluid", "import paddle.fluid as fluid")
        src = src.replace("from spmd.fluid.", "from paddle.fluid.")
    module = types.ModuleType("yolov3_tiny_" + framework)
    module.__file__ = EXAMPLE
    exec(compile(src, EXAMPLE, "exec"), module.__dict__)
    return module


def yolov3_first_losses():
    """The example's first YOLOV3_STEPS losses in fluid, one place (CPU_NUM=1)."""
    os.environ["CPU_NUM"] = "1"
    losses, _, _ = example_in("paddle").train(YOLOV3_STEPS, log=lambda *a: None)
    return {"losses": np.array(losses), "steps": YOLOV3_STEPS}


def main():
    import paddle
    import paddle.fluid as fluid

    cases = {}
    for group in (yolo_cases, roi_cases, box_cases):
        for name, case in group().items():
            cases[name] = run_case(fluid, case)
    for name, case in proposal_cases().items():
        cases[name] = run_multi_case(fluid, case)
    cases["yolov3_tiny_example"] = yolov3_first_losses()
    from oracle_io import save

    save("detection_roi", cases, meta={"paddle": paddle.__version__})
    print("wrote", len(cases), "cases")


if __name__ == "__main__":
    main()
