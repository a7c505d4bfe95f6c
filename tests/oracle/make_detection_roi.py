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
            "out_" + s for s in case["outputs"]])]
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
    cases["yolov3_tiny_example"] = yolov3_first_losses()
    from oracle_io import save

    save("detection_roi", cases, meta={"paddle": paddle.__version__})
    print("wrote", len(cases), "cases")


if __name__ == "__main__":
    main()
