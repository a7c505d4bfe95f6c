"""Outputs of fluid 1.8's loss and metric layers and of its numeric guards (softmax's -64 clip,
cross entropy's finite -log(0)), values and gradients, and of its fluid.metrics classes, for
tests/unit/test_ops_loss.py, test_metrics.py and test_numeric_guards.py. Run with
PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_loss.py

CASES is shared with the tests: name -> (feed name, build, runs, params). build(fluid, vars)
returns the Variables to fetch; the program runs `runs` times on the same feed (the metric
counters and center_loss's centers carry over) and every run's fetches are stored. params
(name -> array) are written into the scope after the startup program, so that fluid and spmd
start from the same parameter values. METRIC_CASES drives the fluid.metrics classes.
"""
import os
import sys

import numpy as np

R = np.random.RandomState(8)


def _u(*shape, **kw):
    return R.uniform(kw.get("low", -1.0), kw.get("high", 1.0), shape).astype(
        kw.get("dtype", "float32"))


def _ids(*shape, **kw):
    return R.randint(0, kw["classes"], shape).astype(kw.get("dtype", "int64"))


EXTREME = np.array([[1000.0, 0.0, -1000.0, 3.0], [-5e4, 5e4, 0.0, 1.0],
                    [0.0, -70.0, -100.0, -63.0], [1.0, 2.0, 3.0, 4.0]])
PROB0 = np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])
SCE_LABEL = R.uniform(0, 1, (3, 4)).astype("float32")
SCE_LABEL[0, 1] = SCE_LABEL[2, 2] = -1.0
AUC_PRED = R.uniform(0, 1, (16, 1))
FEEDS = {
    "extreme32": {"x": EXTREME.astype("float32"), "y": np.array([[0], [0], [2], [1]], "int64")},
    "extreme64": {"x": EXTREME, "y": np.array([[0], [0], [2], [1]], "int64")},
    "extreme_soft": {"x": EXTREME.astype("float32"),
                     "y": np.array([[0.5, 0, 0.5, 0], [0.25, 0, 0.75, 0], [0, 0.5, 0.5, 0],
                                    [0.1, 0.2, 0.3, 0.4]], "float32")},
    "extreme3d": {"x": np.stack([EXTREME, -EXTREME]).astype("float32"),
                  "y": np.array([[[0, 1, 2, 3]], [[3, 2, 1, 0]]], "int64")},
    "prob0": {"x": PROB0.astype("float32"), "y": np.array([[0], [1], [2]], "int64"),
              "soft": np.array([[0, 0.5, 0.5], [0.5, 0.5, 0], [0.2, 0.3, 0.5]], "float32")},
    "prob": {"x": _u(4, 5, low=0.05, high=1.0), "y": np.array([[0], [3], [4], [1]], "int64")},
    "cls": {"x": _u(4, 5), "y": np.array([[1], [0], [4], [2]], "int64")},
    "pair": {"x": _u(6, 1), "y": _u(6, 1, low=-2.0, high=2.0)},
    "kl": {"x": _u(3, 4), "y": _u(3, 4, low=-0.2, high=1.0)},
    "rank": {"label": np.array([[1.0], [-1], [1], [-1], [0.5]], "float32"), "left": _u(5, 1),
             "right": _u(5, 1)},
    "sce": {"x": _u(3, 4, low=-4.0, high=4.0), "y": SCE_LABEL},
    "teacher": {"x": _u(6, 1, low=-3.0, high=3.0),
                "y": np.array([[-2.0], [-1.0], [0.3], [1.6], [-1.5], [0.0]], "float32")},
    "logloss": {"x": _u(5, 1, low=0.05, high=0.95), "y": _u(5, 1, low=0.0, high=1.0)},
    "smooth": {"x": _u(3, 2, 2), "y": _u(3, 2, 2), "iw": _u(3, 2, 2, low=0.5, high=2.0),
               "ow": _u(3, 2, 2, low=0.5, high=2.0)},
    "onehot": {"x": np.eye(4, dtype="float32")[[0, 2, 1]], "prior": _u(1, 4, low=0.0, high=0.5)},
    "dice": {"x": _u(2, 3, 4, low=0.0, high=1.0), "y": _ids(2, 3, 1, classes=4)},
    "npair": {"a": _u(4, 3), "p": _u(4, 3), "y": np.array([1.0, 2.0, 1.0, 3.0], "float32")},
    "focal": {"x": _u(4, 3, low=-3.0, high=3.0), "y": np.array([[0], [2], [-1], [3]], "int32"),
              "fg": np.array([2], "int32")},
    "center": {"x": _u(5, 3), "y": np.array([[0], [2], [0], [1], [0]], "int64")},
    "auc": {"x": np.concatenate([1 - AUC_PRED, AUC_PRED], 1).astype("float32"),
            "y": (R.uniform(0, 1, (16, 1)) < AUC_PRED).astype("int64")},
    "iou": {"x": _ids(3, 5, classes=4, dtype="int32"), "y": _ids(3, 5, classes=4, dtype="int32")},
    "acc": {"x": _u(6, 5), "y": np.array([[1], [0], [4], [2], [3], [3]], "int64")},
}
CENTERS = _u(4, 3)
HS_W, HS_B = _u(5, 4), _u(5, 1)  # default tree of 6 classes: 5 nodes
HS_CW, HS_CB = _u(6, 4), _u(6, 1)  # custom tree over 6 nodes
NCE_W, NCE_B = _u(7, 4), _u(7, 1)
ONE_HOT_DIST = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]  # negatives are always class 2
FEEDS.update({
    "hs": {"x": _u(4, 4), "y": np.array([[0], [5], [3], [2]], "int64")},
    "hs_custom": {"x": _u(3, 4), "y": np.array([[0], [1], [2]], "int64"),
                  "table": np.array([[0, 1, 3], [0, 2, -1], [0, 1, 4]], "int64"),
                  "code": np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0]], "int64")},
    "nce": {"x": _u(4, 4), "y": np.array([[2], [5], [2], [0]], "int64"),
            "sw": _u(4, 1, low=0.5, high=1.5)},
    "sampled": {"x": _u(2, 5), "y": np.array([[1], [3]], "int64"),
                "s": np.array([[1, 3, 0], [3, 3, 2]], "int64"),
                "p": np.array([[0.5, 0.2, 0.3], [0.4, 0.1, 0.2]], "float32")},
})


def _hsigmoid(F, d, custom=False, bias=True):
    kw = {"param_attr": F.ParamAttr(name="hs_w"),
          "bias_attr": F.ParamAttr(name="hs_b") if bias else False}
    if custom:
        out = F.layers.hsigmoid(d["x"], d["y"], 6, path_table=d["table"], path_code=d["code"],
                                is_custom=True, **kw)
    else:
        out = F.layers.hsigmoid(d["x"], d["y"], 6, **kw)
    block = F.default_main_program().global_block()
    pre = [op for op in block.ops if op.type == "hierarchical_sigmoid"][0].output("PreOut")[0]
    params = [block.var("hs_w")] + ([block.var("hs_b")] if bias else [])
    return _grads(F, [out], [d["x"]]) + [block.var(pre)] + F.gradients([_wsum(F, [out])],
                                                                         params)


def _nce(F, d, weighted):
    out = F.layers.nce(d["x"], d["y"], 7, sample_weight=d["sw"] if weighted else None,
                       param_attr=F.ParamAttr(name="nce_w"), bias_attr=F.ParamAttr(name="nce_b"),
                       num_neg_samples=3, sampler="custom_dist", custom_dist=ONE_HOT_DIST,
                       seed=5)
    block = F.default_main_program().global_block()
    return _grads(F, [out], [d["x"]]) + F.gradients([_wsum(F, [out])], [block.var("nce_w"),
                                                                        block.var("nce_b")])


def _sampled(F, d, hits):
    out = F.layers.sampled_softmax_with_cross_entropy(
        d["x"], d["y"], num_samples=2, remove_accidental_hits=hits, use_customized_samples=True,
        customized_samples=d["s"], customized_probabilities=d["p"])
    return _grads(F, [out], [d["x"]])


def _wsum(fluid, outs):
    """sum(out * W) over outs, W fixed per element, so every gradient entry differs."""
    total = None
    for o in outs:
        size = int(np.prod(o.shape))
        w = (0.5 + (np.arange(size) % 7) / 7.0).reshape(o.shape).astype("float32")
        # fluid 1.8's assign takes no float64 array
        w = fluid.layers.cast(fluid.layers.assign(w), _np_dtype(o))
        term = fluid.layers.reduce_sum(o * w)
        total = term if total is None else total + term
    return total


def _grads(fluid, outs, wrt):
    """outs followed by the gradients of _wsum(outs) with respect to each of wrt."""
    for v in wrt:
        v.stop_gradient = False
    return list(outs) + fluid.gradients([_wsum(fluid, outs)], list(wrt))


def _np_dtype(v):
    """numpy's name of a Variable's dtype (fluid prints VarType.FP32, spmd float32)."""
    name = str(v.dtype).split(".")[-1].lower()
    return {"fp32": "float32", "fp64": "float64"}.get(name, name)


def _g(layer, *inputs, **kw):
    """build(F, d) calling F.layers.<layer>(d[i] for i in inputs, **kw), with the gradients
    with respect to the first input."""
    def build(F, d):
        out = getattr(F.layers, layer)(*[d[k] for k in inputs], **kw)
        return _grads(F, [out], [d[inputs[0]]])
    return build


def _swce(F, d, **kw):
    loss, sm = F.layers.softmax_with_cross_entropy(d["x"], d["y"], return_softmax=True, **kw)
    return _grads(F, [loss], [d["x"]]) + [sm]


def _center(F, d, update=True):
    loss = F.layers.center_loss(d["x"], d["y"], num_classes=4, alpha=0.5,
                                param_attr=F.ParamAttr(name="centers"), update_center=update)
    return _grads(F, [loss], [d["x"]]) + [F.default_main_program().global_block().var("centers")]


def _auc(F, d, **kw):
    a, b, stats = F.layers.auc(d["x"], d["y"], **kw)
    return [a, b] + stats


def _acc(F, d):
    correct = F.layers.create_global_var([1], 0, "int32", persistable=True, name="correct")
    total = F.layers.create_global_var([1], 0, "int32", persistable=True, name="total")
    acc = F.layers.accuracy(d["x"], d["y"], k=2, correct=correct, total=total)
    return [acc, correct, total, F.layers.accuracy(d["x"], d["y"])]


def _npair(F, d):
    out = F.layers.npair_loss(d["a"], d["p"], d["y"], l2_reg=0.01)
    return _grads(F, [out], [d["a"], d["p"]])


CASES = {
    # numeric guards: softmax clips x - max at -64, -log(0) is 1e20
    "softmax_extreme32": ("extreme32", lambda F, d: _grads(F, [F.layers.softmax(d["x"])],
                                                          [d["x"]]), 1, {}),
    "softmax_extreme64": ("extreme64", lambda F, d: _grads(F, [F.layers.softmax(d["x"])],
                                                          [d["x"]]), 1, {}),
    "softmax_extreme_axis0": ("extreme32", lambda F, d: [F.layers.softmax(d["x"], axis=0)],
                              1, {}),
    "swce_extreme32": ("extreme32", _swce, 1, {}),
    "swce_extreme64": ("extreme64", _swce, 1, {}),
    "swce_extreme_soft": ("extreme_soft", lambda F, d: _swce(F, d, soft_label=True), 1, {}),
    "swce_extreme_axis1": ("extreme3d", lambda F, d: _swce(F, d, axis=1), 1, {}),
    "cross_entropy_p0": ("prob0", lambda F, d: [F.layers.cross_entropy(d["x"], d["y"])], 1,
                         {}),
    "cross_entropy_p0_soft": ("prob0", lambda F, d: [
        F.layers.cross_entropy(d["x"], d["soft"], soft_label=True)], 1, {}),
    "cross_entropy_grad": ("prob", _g("cross_entropy", "x", "y"), 1, {}),
    "cross_entropy_ignore": ("prob", _g("cross_entropy", "x", "y", ignore_index=3), 1, {}),
    # loss layers
    "bpr_loss": ("cls", _g("bpr_loss", "x", "y"), 1, {}),
    "center_loss": ("center", _center, 2, {"centers": CENTERS}),
    "huber_loss": ("pair", _g("huber_loss", "x", "y", delta=0.8), 1, {}),
    "kldiv_none": ("kl", _g("kldiv_loss", "x", "y", reduction="none"), 1, {}),
    "kldiv_mean": ("kl", _g("kldiv_loss", "x", "y"), 1, {}),
    "kldiv_sum": ("kl", _g("kldiv_loss", "x", "y", reduction="sum"), 1, {}),
    "kldiv_batchmean": ("kl", _g("kldiv_loss", "x", "y", reduction="batchmean"), 1, {}),
    "margin_rank_loss": ("rank", lambda F, d: _grads(F, [F.layers.margin_rank_loss(
        d["label"], d["left"], d["right"], margin=0.2)], [d["left"], d["right"]]), 1, {}),
    "rank_loss": ("rank", lambda F, d: _grads(F, [F.layers.rank_loss(
        d["label"], d["left"], d["right"])], [d["left"], d["right"]]), 1, {}),
    "mse_loss": ("pair", _g("mse_loss", "x", "y"), 1, {}),
    "npair_loss": ("npair", _npair, 1, {}),
    "sce": ("sce", _g("sigmoid_cross_entropy_with_logits", "x", "y"), 1, {}),
    "sce_ignore_normalize": ("sce", _g("sigmoid_cross_entropy_with_logits", "x", "y",
                                       ignore_index=-1, normalize=True), 1, {}),
    "teacher_student": ("teacher", _g("teacher_student_sigmoid_loss", "x", "y"), 1, {}),
    "teacher_student_bounds": ("teacher", _g("teacher_student_sigmoid_loss", "x", "y",
                                             soft_max_up_bound=1.0,
                                             soft_max_lower_bound=-0.5), 1, {}),
    "log_loss": ("logloss", _g("log_loss", "x", "y"), 1, {}),
    "smooth_l1": ("smooth", _g("smooth_l1", "x", "y"), 1, {}),
    "smooth_l1_weights": ("smooth", _g("smooth_l1", "x", "y", "iw", "ow", sigma=2.0), 1, {}),
    "label_smooth": ("onehot", lambda F, d: [F.layers.label_smooth(d["x"], epsilon=0.1)], 1,
                     {}),
    "label_smooth_prior": ("onehot", lambda F, d: [
        F.layers.label_smooth(d["x"], prior_dist=d["prior"], epsilon=0.3)], 1, {}),
    "dice_loss": ("dice", _g("dice_loss", "x", "y"), 1, {}),
    "sigmoid_focal_loss": ("focal", _g("sigmoid_focal_loss", "x", "y", "fg"), 1, {}),
    "sigmoid_focal_loss_args": ("focal", _g("sigmoid_focal_loss", "x", "y", "fg", gamma=1.5,
                                            alpha=0.7), 1, {}),
    "hsigmoid": ("hs", _hsigmoid, 1, {"hs_w": HS_W, "hs_b": HS_B}),
    "hsigmoid_no_bias": ("hs", lambda F, d: _hsigmoid(F, d, bias=False), 1, {"hs_w": HS_W}),
    "hsigmoid_custom": ("hs_custom", lambda F, d: _hsigmoid(F, d, custom=True), 1,
                        {"hs_w": HS_CW, "hs_b": HS_CB}),
    "nce_custom_dist": ("nce", lambda F, d: _nce(F, d, False), 1,
                        {"nce_w": NCE_W, "nce_b": NCE_B}),
    "nce_sample_weight": ("nce", lambda F, d: _nce(F, d, True), 1,
                          {"nce_w": NCE_W, "nce_b": NCE_B}),
    "sampled_softmax": ("sampled", lambda F, d: _sampled(F, d, True), 1, {}),
    "sampled_softmax_keep_hits": ("sampled", lambda F, d: _sampled(F, d, False), 1, {}),
    # metric layers
    "auc_roc": ("auc", lambda F, d: _auc(F, d, num_thresholds=200, slide_steps=2), 3, {}),
    "auc_pr": ("auc", lambda F, d: _auc(F, d, curve="PR", num_thresholds=50), 2, {}),
    "auc_global_only": ("auc", lambda F, d: _auc(F, d, num_thresholds=100, slide_steps=0), 2,
                        {}),
    "mean_iou": ("iou", lambda F, d: list(F.layers.mean_iou(d["x"], d["y"], 4)), 1, {}),
    "accuracy": ("acc", _acc, 1, {}),
}

# review cases (a RandomState of their own, so the draws above keep their values)
R2 = np.random.RandomState(9)
FEEDS.update({
    "cls3d": {"x": R2.uniform(-2, 2, (2, 3, 4)).astype("float32"),
              "y": np.array([[[0, 1, 2, 1]], [[1, 1, 0, 2]]], "int64")},
    "sce_frac": {"x": R2.uniform(-3, 3, (3, 4)).astype("float32"),
                 "y": np.array([[0.3, -1.5, -1.0, 1.0], [-0.5, 0.7, -1.0, 0.0],
                                [1.0, 1.0, -2.0, -1.0]], "float32")},
    "prob_soft": {"x": R2.uniform(0.05, 1.0, (3, 4)).astype("float32"),
                  "y": R2.dirichlet(np.ones(4), 3).astype("float32")},
    "sq": {"x": R2.uniform(-1, 1, (4, 3)).astype("float32"),
           "y": R2.uniform(-1, 1, (4, 3)).astype("float32")},
    "soft3d": {"x": R2.uniform(-2, 2, (2, 3, 4)).astype("float32"),
               "y": R2.dirichlet(np.ones(3), (2, 4)).transpose(0, 2, 1).astype("float32")},
    "cls3d_last": {"x": R2.uniform(-2, 2, (2, 3, 4)).astype("float32"),
                   "y": np.array([[[0], [3], [1]], [[2], [2], [0]]], "int64")},
    "cls_neg": {"x": FEEDS["cls"]["x"], "y": np.array([[1], [-1], [4], [2]], "int64")},
    "auc_edges": {"x": np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.25, 0.75],
                                 [0.75, 0.25], [0.0, 1.0]], "float32"),
                  "y": np.array([[0], [1], [1], [0], [1], [0]], "int64")},
    "teacher_edges": {"x": R2.uniform(-3, 3, (6, 1)).astype("float32"),
                      "y": np.array([[-2.0], [-1.0], [0.0], [1.0], [0.999], [2.0]], "float32")},
    "huber_kinks": {"x": np.zeros((6, 1), "float32"),
                    "y": np.array([[-0.8], [0.8], [-0.3], [1.5], [-2.0], [0.0]], "float32")},
})
CASES.update({
    "ignore_index_swce": ("cls", lambda F, d: _swce(F, d, ignore_index=0), 1, {}),
    "ignore_index_swce_axis1": ("cls3d", lambda F, d: _swce(F, d, ignore_index=1, axis=1), 1,
                                {}),
    "ignore_index_swce_negative": ("cls_neg", lambda F, d: _swce(F, d, ignore_index=-1), 1,
                                   {}),
    "swce_soft_axis1": ("soft3d", lambda F, d: _swce(F, d, soft_label=True, axis=1), 1, {}),
    "swce_unstable": ("cls", lambda F, d: _swce(F, d, numeric_stable_mode=False), 1, {}),
    "cross_entropy_3d": ("cls3d_last", lambda F, d: _grads(F, [F.layers.cross_entropy(
        F.layers.softmax(d["x"]), d["y"])], [d["x"]]), 1, {}),
    "sce_ignore_fraction": ("sce_frac", _g("sigmoid_cross_entropy_with_logits", "x", "y",
                                          ignore_index=-1), 1, {}),
    "sce_ignore_fraction_normalize": ("sce_frac", _g(
        "sigmoid_cross_entropy_with_logits", "x", "y", ignore_index=-1, normalize=True), 1, {}),
    "cross_entropy_soft_grad": ("prob_soft", _g("cross_entropy", "x", "y", soft_label=True),
                                1, {}),
    "square_error_cost": ("sq", lambda F, d: _grads(F, [F.layers.square_error_cost(
        d["x"], d["y"])], [d["x"], d["y"]]), 1, {}),
    "huber_kinks": ("huber_kinks", lambda F, d: _grads(F, [F.layers.huber_loss(
        d["x"], d["y"], delta=0.8)], [d["x"], d["y"]]), 1, {}),
    "log_loss_eps": ("logloss", _g("log_loss", "x", "y", epsilon=0.05), 1, {}),
    "dice_loss_eps": ("dice", _g("dice_loss", "x", "y", epsilon=0.5), 1, {}),
    "margin_rank_default": ("rank", lambda F, d: _grads(F, [F.layers.margin_rank_loss(
        d["label"], d["left"], d["right"])], [d["left"], d["right"]]), 1, {}),
    "npair_loss_default": ("npair", lambda F, d: _grads(F, [F.layers.npair_loss(
        d["a"], d["p"], d["y"])], [d["a"], d["p"]]), 1, {}),
    "accuracy_k3": ("acc", lambda F, d: [F.layers.accuracy(d["x"], d["y"], k=3)], 2, {}),
    "auc_default": ("auc", lambda F, d: _auc(F, d), 3, {}),
    "auc_edges": ("auc_edges", lambda F, d: _auc(F, d, num_thresholds=4, slide_steps=1), 2,
                  {}),
    "auc_edges_pr": ("auc_edges", lambda F, d: _auc(F, d, curve="PR", num_thresholds=4,
                                                    slide_steps=3), 4, {}),
    "center_loss_frozen": ("center", lambda F, d: _center(F, d, update=False), 2,
                           {"centers": CENTERS}),
    "teacher_student_label_edges": ("teacher_edges", _g("teacher_student_sigmoid_loss", "x",
                                                        "y"), 1, {}),
    "cross_entropy_soft_ignore": ("prob_soft", _g("cross_entropy", "x", "y", soft_label=True,
                                                  ignore_index=0), 1, {}),
    # fluid only: it drops an outside weight given alone (spmd refuses it)
    "smooth_l1_outside_only": ("smooth", lambda F, d: [F.layers.smooth_l1(
        d["x"], d["y"], outside_weight=d["ow"])], 1, {}),
})


_PROBS = [R.uniform(0, 1, (8, 1)) for _ in range(2)]
_LABELS = [(R.uniform(0, 1, (8, 1)) < p).astype("int64") for p in _PROBS]
_TWO_COL = [np.concatenate([1 - p, p], 1) for p in _PROBS]
# fluid.metrics classes: name -> (class, constructor kwargs, the update calls' arguments)
METRIC_CASES = {
    "accuracy": ("Accuracy", {}, [(np.array([0.5]), 4), (0.75, 2),
                                  (np.array([1.0], "float32"), np.array([3]))]),
    "precision": ("Precision", {}, [(p, y) for p, y in zip(_PROBS, _LABELS)]),
    "recall": ("Recall", {"name": "rec"}, [(p, y) for p, y in zip(_PROBS, _LABELS)]),
    "auc": ("Auc", {"name": "auc", "num_thresholds": 50},
            [(p, y) for p, y in zip(_TWO_COL, _LABELS)]),
    "auc_pr": ("Auc", {"name": "auc", "curve": "PR"},
               [(p, y) for p, y in zip(_TWO_COL, _LABELS)]),
    "chunk": ("ChunkEvaluator", {}, [(4, 5, 3), (np.array([2]), np.array([1]), np.array([1]))]),
    "chunk_empty": ("ChunkEvaluator", {}, [(0, 3, 0)]),
    "edit_distance": ("EditDistance", {"name": "ed"},
                      [(np.array([[0.0], [2.0], [1.0]]), 3),
                       (np.array([[0.0], [4.0]], "float32"), np.array([2]))]),
    "composite": ("CompositeMetric", {}, [(p, y) for p, y in zip(_PROBS, _LABELS)]),
}


def run_metric(metrics, name):
    """Run METRIC_CASES[name] with a fluid.metrics module: {"eval": the result after each
    update, "states": get_config()'s states at the end, "reset": the states after reset()}."""
    cls, kwargs, calls = METRIC_CASES[name]
    metric = getattr(metrics, cls)(**kwargs)
    if cls == "CompositeMetric":
        metric.add_metric(metrics.Precision())
        metric.add_metric(metrics.Recall())
    evals = []
    for args in calls:
        metric.update(*args)
        evals.append(metric.eval())
    states = metric.get_config()["states"]
    metric.reset()
    return {"eval": evals, "states": states, "reset": metric.get_config()["states"],
            "name": str(metric)}


def run_case(fluid, name):
    """Build and run CASES[name] in `fluid` (real fluid or spmd.fluid); a list of runs, each
    the list of fetched arrays."""
    feed_name, build, runs, params = CASES[name]
    feeds = FEEDS[feed_name]
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(prog, startup):
        vs = {k: fluid.data(k, list(v.shape), str(v.dtype)) for k, v in feeds.items()}
        fetch = build(fluid, vs)
    scope = fluid.core.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        for pname, value in params.items():
            scope.find_var(pname).get_tensor().set(value, fluid.CPUPlace())
        return [[np.array(a) for a in exe.run(prog, feed=feeds, fetch_list=fetch)]
                for _ in range(runs)]


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    cases = {name: run_case(fluid, name) for name in sorted(CASES)}
    cases.update({"metric_" + name: run_metric(fluid.metrics, name) for name in METRIC_CASES})
    save("loss", cases, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
