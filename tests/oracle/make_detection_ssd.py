"""Outputs of fluid 1.8's SSD-family detection layers and ops on fixed inputs (prior_box,
density_prior_box, multi_box_head, box_coder, iou_similarity, bipartite_match,
target_assign, mine_hard_examples, ssd_loss, multiclass_nms / detection_output, box_clip,
detection_map), and the first losses of examples/detection/ssd_tiny.py, for
tests/unit/test_ops_detection_ssd_oracle.py and tests/unit/test_ssd_tiny.py. Run it with
PaddlePaddle 1.8.5's Python, from a folder outside the checkout:

    cd /tmp && /path/to/venv37/bin/python /path/to/tests/oracle/make_detection_ssd.py

CASES: name -> (feeds, build); feeds: name -> (array, recursive sequence lengths or None);
build(fluid, vars) returns the variables to fetch. After the startup program every
parameter (sorted by name) gets fixed values (param_values). Each output is stored with its
LoD (offsets). run_case is shared with the test, which runs the same programs in spmd.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
R = np.random.RandomState(7)


def _boxes(n, lo=0.0, hi=1.0, rng=R):
    """n valid corner boxes with coordinates in [lo, hi]."""
    a = rng.uniform(lo, hi, (n, 2, 2))
    return np.concatenate([a.min(axis=1), a.max(axis=1)], axis=1).astype("float32")


FEAT = R.uniform(-1, 1, (2, 3, 4, 5)).astype("float32")
IMAGE = np.zeros((2, 3, 40, 50), "float32")
PRIORS = _boxes(6)
PRIOR_VAR = R.uniform(0.1, 0.3, (6, 4)).astype("float32")
GT = _boxes(5)  # images of 3 and 2 boxes
GT_LOD = [[3, 2]]
PIXEL_GT = _boxes(5, 0, 30)
PIXEL_PRIORS = _boxes(6, 0, 30)
DELTAS = R.uniform(-0.5, 0.5, (2, 6, 4)).astype("float32")
DELTAS_AXIS1 = R.uniform(-0.5, 0.5, (6, 3, 4)).astype("float32")
DIST = R.uniform(0, 1, (5, 6)).astype("float32")
DIST[1, 2] = DIST[4, 0] = 0.0
NMS_BOXES = np.concatenate([_boxes(8)[None], _boxes(8)[None]]).astype("float32")
NMS_BOXES[0, 1] = NMS_BOXES[0, 0] + 0.01  # near-duplicates NMS must drop
NMS_SCORES = R.uniform(0, 1, (2, 3, 8)).astype("float32")
LOD_SCORES = R.uniform(0, 1, (7, 3)).astype("float32")
LOD_BOXES = np.stack([_boxes(7) for _ in range(3)], axis=1).astype("float32")
CLIP_BOXES = R.uniform(-10, 60, (5, 4)).astype("float32")
IM_INFO = np.array([[40, 50, 1.0], [60, 30, 2.0]], "float32")
SSD_LOC = R.uniform(-0.3, 0.3, (2, 6, 4)).astype("float32")
SSD_CONF = R.uniform(-1, 1, (2, 6, 3)).astype("float32")
SSD_LABEL = np.array([[1], [2], [1], [2], [2]], "int32")
DET = np.array([[1, 0.9, 0.1, 0.1, 0.4, 0.4], [1, 0.8, 0.5, 0.5, 0.9, 0.9],
                [2, 0.7, 0.1, 0.5, 0.4, 0.9], [1, 0.6, 0.12, 0.1, 0.42, 0.41],
                [2, 0.95, 0.2, 0.2, 0.6, 0.6], [1, 0.3, 0.0, 0.0, 0.2, 0.2]], "float32")
DET_LOD = [[4, 2]]
MAP_GT = np.array([[1, 0, 0.1, 0.1, 0.4, 0.4], [2, 0, 0.1, 0.5, 0.4, 0.9],
                   [1, 1, 0.5, 0.5, 0.9, 0.9], [2, 0, 0.2, 0.2, 0.6, 0.6],
                   [1, 0, 0.6, 0.6, 0.9, 0.9]], "float32")
MAP_GT_LOD = [[3, 2]]
MAP_GT5 = np.delete(MAP_GT, 1, axis=1)  # [label, box]: no difficult column
DET3 = np.concatenate([DET, [[2, 0.5, 0.6, 0.6, 0.9, 0.9], [1, 0.4, 0.0, 0.0, 1.2, 1.1]]]
                      ).astype("float32")
DET3_LOD = [[4, 2, 2]]
GT3 = np.concatenate([MAP_GT[:3], MAP_GT[3:]]).astype("float32")
GT3_LOD = [[3, 0, 2]]  # the middle image has no ground truth: its detections are false


def _op(fluid, op_type, inputs, outputs, attrs):
    """Append a raw op (no fluid layer builds it); outputs: slot -> dtype."""
    block = fluid.default_main_program().global_block()
    outs = {slot: block.create_var(name=op_type + "_" + slot.lower(), dtype=dtype)
            for slot, dtype in sorted(outputs.items())}
    block.append_op(type=op_type, inputs={k: [v] for k, v in inputs.items()},
                    outputs={k: [v] for k, v in outs.items()}, attrs=attrs)
    return [outs[k] for k in sorted(outs)]


def _ssd(**kw):
    def build(F, d):
        return [F.layers.ssd_loss(d["loc"], d["conf"], d["gt"], d["label"], d["priors"],
                                  d["pvar"], **kw)]
    return build


def _matched(F, d, match_type="per_prediction"):
    iou = F.layers.iou_similarity(d["gt"], d["priors"])
    return F.layers.bipartite_match(iou, match_type, 0.3)


def _mine(F, d, **attrs):
    idx, dist = _matched(F, d)
    return _op(F, "mine_hard_examples", {"ClsLoss": d["cls"], "MatchIndices": idx,
                                         "MatchDist": dist},
               {"NegIndices": "int32", "UpdatedMatchIndices": "int32"}, attrs)


def _target_assign_neg(F, d):
    idx, _ = _matched(F, d)
    neg, updated = _mine(F, d, neg_pos_ratio=1.0, neg_dist_threshold=0.5)
    lab = F.layers.reshape(d["label"], [0, -1, 1])
    return list(F.layers.target_assign(F.layers.cast(lab, "float32"), updated, neg,
                                       mismatch_value=7)) + [neg]


def _heads(F, d):
    feats = [F.layers.conv2d(d["img"], 4, 3, stride=s, padding=1) for s in (1, 2, 4)]
    return list(F.layers.multi_box_head(feats, d["img"], 32, 3, [[2.0], [2.0, 3.0], [1.0]],
                                        min_ratio=20, max_ratio=80, flip=True, clip=True))


def _heads_two(F, d):
    feats = [F.layers.conv2d(d["img"], 4, 3, stride=s, padding=1) for s in (2, 4)]
    return list(F.layers.multi_box_head(feats, d["img"], 32, 2, [[2.0], [3.0]],
                                        min_sizes=[6.0, 12.0], max_sizes=[12.0, 20.0],
                                        steps=[4.0, 8.0], kernel_size=3, pad=1,
                                        min_max_aspect_ratios_order=True))


CASES = {
    "prior_box": ({"feat": (FEAT, None), "image": (IMAGE, None)}, lambda F, d: list(
        F.layers.prior_box(d["feat"], d["image"], [8.0, 16.0], [16.0, 30.0], [2.0, 3.0],
                           flip=True, clip=True)) + list(
        F.layers.prior_box(d["feat"], d["image"], [10.0], aspect_ratios=[0.5, 2.0],
                           variance=[0.1, 0.2, 0.3, 0.4], steps=[9.0, 11.0], offset=0.3))),
    "prior_box_minmax_order": ({"feat": (FEAT, None), "image": (IMAGE, None)}, lambda F, d: [
        F.layers.prior_box(d["feat"], d["image"], [8.0, 12.0], [12.0, 20.0], [2.0],
                           flip=True, min_max_aspect_ratios_order=True)[0]]),
    "density_prior_box": ({"feat": (FEAT, None), "image": (IMAGE, None)}, lambda F, d: list(
        F.layers.density_prior_box(d["feat"], d["image"], [2, 1], [6.0, 12.0], [1.0, 2.0],
                                   clip=True)) + list(
        F.layers.density_prior_box(d["feat"], d["image"], [3], [9.0], [0.5],
                                   steps=[8.0, 12.0], offset=0.4, flatten_to_2d=True))),
    "box_coder_encode": ({"priors": (PRIORS, None), "pvar": (PRIOR_VAR, None),
                          "gt": (GT, GT_LOD)}, lambda F, d: [
        F.layers.box_coder(d["priors"], d["pvar"], d["gt"]),
        F.layers.box_coder(d["priors"], [0.1, 0.1, 0.2, 0.2], d["gt"]),
        F.layers.box_coder(d["priors"], [], d["gt"])]),
    "box_coder_pixels": ({"priors": (PIXEL_PRIORS, None), "gt": (PIXEL_GT, None),
                          "pvar": (PRIOR_VAR, None), "deltas": (DELTAS, None)}, lambda F, d: [
        F.layers.box_coder(d["priors"], d["pvar"], d["gt"], box_normalized=False),
        F.layers.box_coder(d["priors"], d["pvar"], d["deltas"], "decode_center_size",
                           box_normalized=False)]),
    "box_coder_decode": ({"priors": (PRIORS, None), "pvar": (PRIOR_VAR, None),
                          "deltas": (DELTAS, None), "d1": (DELTAS_AXIS1, None)}, lambda F, d: [
        F.layers.box_coder(d["priors"], d["pvar"], d["deltas"], "decode_center_size"),
        F.layers.box_coder(d["priors"], [0.1, 0.2, 0.3, 0.4], d["deltas"],
                           "decode_center_size"),
        F.layers.box_coder(d["priors"], d["pvar"], d["d1"], "decode_center_size", axis=1),
        F.layers.box_coder(d["priors"], [0.2, 0.1, 0.4, 0.3], d["d1"], "decode_center_size",
                           axis=1)]),
    "iou_similarity": ({"gt": (GT, GT_LOD), "priors": (PRIORS, None),
                        "pgt": (PIXEL_GT, None), "pp": (PIXEL_PRIORS, None)}, lambda F, d: [
        F.layers.iou_similarity(d["gt"], d["priors"]),
        F.layers.iou_similarity(d["pgt"], d["pp"], box_normalized=False)]),
    "bipartite_match": ({"dist": (DIST, GT_LOD), "one": (DIST, None)}, lambda F, d: list(
        F.layers.bipartite_match(d["dist"])) + list(
        F.layers.bipartite_match(d["dist"], "per_prediction", 0.4)) + list(
        F.layers.bipartite_match(d["one"]))),
    "target_assign": ({"gt": (GT, GT_LOD), "priors": (PRIORS, None), "pvar": (PRIOR_VAR, None)},
                      lambda F, d: list(F.layers.target_assign(
                          F.layers.box_coder(d["priors"], d["pvar"], d["gt"]),
                          _matched(F, d)[0], mismatch_value=0))),
    "target_assign_negatives": ({"gt": (GT, GT_LOD), "priors": (PRIORS, None),
                                 "label": (SSD_LABEL, GT_LOD),
                                 "cls": (SSD_CONF[:, :, 0].copy(), None)}, _target_assign_neg),
    "mine_hard_examples": ({"gt": (GT, GT_LOD), "priors": (PRIORS, None),
                            "cls": (SSD_CONF[:, :, 1].copy(), None)}, lambda F, d:
                           _mine(F, d, neg_pos_ratio=2.0, neg_dist_threshold=0.6)),
    "mine_hard_example_mode": ({"gt": (GT, GT_LOD), "priors": (PRIORS, None),
                                "cls": (SSD_CONF[:, :, 2].copy(), None)}, lambda F, d:
                               _mine(F, d, mining_type="hard_example", sample_size=3)),
    "ssd_loss": ({"loc": (SSD_LOC, None), "conf": (SSD_CONF, None), "gt": (GT, GT_LOD),
                  "label": (SSD_LABEL, GT_LOD), "priors": (PRIORS, None),
                  "pvar": (PRIOR_VAR, None)}, _ssd()),
    "ssd_loss_options": ({"loc": (SSD_LOC, None), "conf": (SSD_CONF, None),
                          "gt": (GT, GT_LOD), "label": (SSD_LABEL, GT_LOD),
                          "priors": (PRIORS, None), "pvar": (PRIOR_VAR, None)},
                         _ssd(match_type="bipartite", normalize=False, neg_pos_ratio=1.0,
                              overlap_threshold=0.3, loc_loss_weight=2.0,
                              conf_loss_weight=0.5, background_label=0)),
    "multiclass_nms": ({"boxes": (NMS_BOXES, None), "scores": (NMS_SCORES, None)},
                       lambda F, d: [
        F.layers.multiclass_nms(d["boxes"], d["scores"], 0.2, 5, 4, 0.4),
        F.layers.multiclass_nms(d["boxes"], d["scores"], 0.1, -1, -1, 0.3, nms_eta=0.7,
                                background_label=-1),
        F.layers.multiclass_nms(d["boxes"] * 30.0, d["scores"], 0.3, 10, 3, 0.2,
                                normalized=False, background_label=2)]),
    "matrix_nms": ({"boxes": (NMS_BOXES, None), "scores": (NMS_SCORES, None)},
                   lambda F, d: list(F.layers.matrix_nms(d["boxes"], d["scores"], 0.2, 0.1, 6, 5,
                                                         return_index=True)) + [
        F.layers.matrix_nms(d["boxes"], d["scores"], 0.1, 0.3, -1, -1, use_gaussian=True,
                            gaussian_sigma=3.0, background_label=-1),
        F.layers.matrix_nms(d["boxes"] * 20.0, d["scores"], 0.3, 0.2, 4, 3,
                            normalized=False, background_label=1)]),
    "matrix_nms_empty": ({"boxes": (NMS_BOXES, None), "scores": (NMS_SCORES, None)},
                         lambda F, d: list(F.layers.matrix_nms(d["boxes"], d["scores"], 0.999,
                                                               0.5, 5, 4, return_index=True))),
    "multiclass_nms_lod": ({"boxes": (LOD_BOXES, [[4, 3]]), "scores": (LOD_SCORES, [[4, 3]])},
                           lambda F, d: [F.layers.multiclass_nms(d["boxes"], d["scores"], 0.3,
                                                                 10, 4, 0.5)]),
    "multiclass_nms_empty": ({"boxes": (NMS_BOXES, None), "scores": (NMS_SCORES, None)},
                             lambda F, d: [F.layers.multiclass_nms(d["boxes"], d["scores"],
                                                                   0.999, 5, 4)]),
    "detection_output": ({"loc": (SSD_LOC, None), "conf": (SSD_CONF, None),
                          "priors": (PRIORS, None), "pvar": (PRIOR_VAR, None)}, lambda F, d:
                         [F.layers.detection_output(d["loc"], d["conf"], d["priors"],
                                                    d["pvar"], score_threshold=0.2)] + list(
                         F.layers.detection_output(d["loc"], d["conf"], d["priors"], d["pvar"],
                                                   nms_threshold=0.5, keep_top_k=3,
                                                   return_index=True))),
    "box_clip": ({"boxes": (CLIP_BOXES, [[3, 2]]), "info": (IM_INFO, None)}, lambda F, d: [
        F.layers.box_clip(d["boxes"], d["info"])]),
    "multi_box_head": ({"img": (R.uniform(-1, 1, (2, 3, 16, 16)).astype("float32"), None)},
                       _heads),
    "multi_box_head_two": ({"img": (R.uniform(-1, 1, (2, 3, 16, 16)).astype("float32"),
                                    None)}, _heads_two),
    "detection_map": ({"det": (DET, DET_LOD), "gt": (MAP_GT, MAP_GT_LOD)}, lambda F, d: [
        F.layers.detection.detection_map(d["det"], d["gt"], 3, overlap_threshold=0.5),
        F.layers.detection.detection_map(d["det"], d["gt"], 3, overlap_threshold=0.5,
                                         evaluate_difficult=False, ap_version="11point")]),
    "detection_map_more": ({"det": (DET3, DET3_LOD), "gt": (GT3, GT3_LOD),
                            "gt5": (MAP_GT5, MAP_GT_LOD), "det2": (DET, DET_LOD)},
                           lambda F, d: [
        F.layers.detection.detection_map(d["det"], d["gt"], 3, overlap_threshold=0.3),
        F.layers.detection.detection_map(d["det"], d["gt"], 4, overlap_threshold=0.6,
                                         ap_version="11point"),
        F.layers.detection.detection_map(d["det2"], d["gt5"], 3, overlap_threshold=0.5)]),
}


# fluid.metrics.DetectionMAP over batches: (detections, LoD), then ground truth rows of
# [label, difficult, box] per image
METRIC_BATCHES = [(DET, DET_LOD, MAP_GT, MAP_GT_LOD), (DET3, DET3_LOD, GT3, GT3_LOD),
                  (DET[2:], [[2, 2]], MAP_GT[1:], [[2, 2]])]


def run_metric(fluid):
    """The current and accumulated mAP of METRIC_BATCHES fed in turn, reset before the last:
    a list of floats [cur, accum] per batch."""
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard():
        with fluid.program_guard(prog, startup):
            det = fluid.data("det", [None, 6], "float32", lod_level=1)
            label = fluid.data("label", [None, 1], "int32", lod_level=1)
            difficult = fluid.data("difficult", [None, 1], "int32", lod_level=1)
            box = fluid.data("box", [None, 4], "float32", lod_level=1)
            metric = fluid.metrics.DetectionMAP(det, label, box, difficult, class_num=3,
                                                overlap_threshold=0.5,
                                                evaluate_difficult=False)
            cur, accum = metric.get_map_var()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    out = []
    with fluid.scope_guard(scope):
        exe.run(startup)
        for i, (d, d_lod, gt, gt_lod) in enumerate(METRIC_BATCHES):
            if i == len(METRIC_BATCHES) - 1:
                metric.reset(exe)
            feed = {"det": _feed(fluid, d, d_lod),
                    "label": _feed(fluid, gt[:, :1].astype("int32"), gt_lod),
                    "difficult": _feed(fluid, gt[:, 1:2].astype("int32"), gt_lod),
                    "box": _feed(fluid, gt[:, 2:], gt_lod)}
            values = exe.run(prog, feed=feed, fetch_list=[cur, accum])
            out.append([float(np.array(v).reshape(-1)[0]) for v in values])
    return out


def param_values(names_and_shapes):
    out = {}
    for i, (name, shape) in enumerate(sorted(names_and_shapes)):
        out[name] = np.random.RandomState(200 + i).uniform(-0.5, 0.5, shape).astype("float32")
    return out


def _feed(fluid, array, lengths):
    if lengths is None:
        return array
    return fluid.create_lod_tensor(array, lengths, fluid.CPUPlace())


def run_case(fluid, name):
    """Build and run CASES[name]: a list of (array, LoD offsets) per fetched output."""
    feeds, build = CASES[name]
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard():
        with fluid.program_guard(prog, startup):
            # a LoD input's row count is unknown when the program is built (as in real use)
            vs = {k: fluid.data(k, [None if lod else a.shape[0]] + list(a.shape[1:]),
                                str(a.dtype), lod_level=0 if lod is None else len(lod))
                  for k, (a, lod) in sorted(feeds.items())}
            fetch = build(fluid, vs)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    params = [(p.name, tuple(p.shape)) for p in prog.global_block().all_parameters()]
    for pname, value in param_values(params).items():
        scope.find_var(pname).get_tensor().set(value, fluid.CPUPlace())
    outs = exe.run(prog, feed={k: _feed(fluid, a, lod) for k, (a, lod) in feeds.items()},
                   fetch_list=fetch, scope=scope, return_numpy=False)
    return [(np.array(o), [list(map(int, level)) for level in o.lod()]) for o in outs]


EXAMPLE = os.path.join(HERE, "..", "..", "examples", "detection", "ssd_tiny.py")


def load_example(fluid_package):
    """examples/detection/ssd_tiny.py as a module whose `fluid` is `fluid_package`
    ("paddle.fluid" for the oracle, "spmd.fluid" as written): its import lines switched."""
    import types

    with open(EXAMPLE) as f:
        source = f.read().replace("spmd.fluid", fluid_package)
    module = types.ModuleType("ssd_tiny")
    module.__file__ = EXAMPLE
    exec(compile(source, EXAMPLE, "exec"), module.__dict__)
    return module


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(HERE, ".."))
    from oracle_io import save

    out = {}
    for name in sorted(CASES):
        out[name] = [{"value": v, "lod": lod} for v, lod in run_case(fluid, name)]
    out["detection_map_metric"] = run_metric(fluid)
    example = load_example("paddle.fluid")
    out["ssd_tiny_losses"] = {opt: example.first_losses(optimizer=opt)
                              for opt in ("rmsprop", "momentum")}
    save("detection_ssd", out, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
