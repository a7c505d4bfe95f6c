"""Metrics: the auc / mean_iou / accuracy layers against stored outputs of real fluid
(PaddlePaddle 1.8.5, tests/oracle/make_loss.py; auc's counters carry over several runs), the
auc and mean_iou ops against numpy references, and every fluid.metrics class against fluid
1.8.5's class on the same inputs."""
from __future__ import annotations

import numpy as np
import pytest
from loss_oracle import assert_matches_fluid
from op_harness import OpCase, check_forward, run_forward
from oracle.make_loss import METRIC_CASES, run_case, run_metric
from oracle_io import load

import spmd.fluid as fluid
from spmd.errors import ExecutionError, InvalidArgumentError

ORACLE = load("loss")
LAYER_CASES = ["accuracy", "accuracy_k3", "auc_default", "auc_edges", "auc_edges_pr",
               "auc_global_only", "auc_pr", "auc_roc", "mean_iou"]


@pytest.mark.parametrize("name", LAYER_CASES)
def test_layer_matches_fluid(name):
    assert_matches_fluid(name, rtol=1e-6, atol=1e-7)


def _same(got, want, where):
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), f"{where}: {len(got)} values, fluid gave {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    elif isinstance(want, str):
        assert got == want, where
    else:
        g, w = np.asarray(got), np.asarray(want)
        assert g.shape == w.shape, f"{where}: shape {g.shape} != fluid's {w.shape}"
        np.testing.assert_allclose(g.astype(float), w.astype(float), rtol=1e-12, err_msg=where)


@pytest.mark.parametrize("name", sorted(METRIC_CASES))
def test_metric_class_matches_fluid(name):
    _same(run_metric(fluid.metrics, name), ORACLE["metric_" + name], name)


def test_metric_errors_are_actionable():
    with pytest.raises(ValueError, match="no data yet"):
        fluid.metrics.Accuracy().eval()
    with pytest.raises(InvalidArgumentError, match="can not be negative"):
        fluid.metrics.Accuracy().update(0.5, -1)
    with pytest.raises(InvalidArgumentError, match="numpy ndarray"):
        fluid.metrics.Precision().update([1, 0], np.array([1, 0]))
    with pytest.raises(InvalidArgumentError, match="MetricBase"):
        fluid.metrics.CompositeMetric().add_metric(object())
    with pytest.raises(NotImplementedError, match="base class"):
        fluid.metrics.MetricBase("m").update(None, None)
    with pytest.raises(InvalidArgumentError, match="not a probability"):
        fluid.metrics.Auc("a", num_thresholds=10).update(np.array([[0.0, 1.5]]), np.array([1]))


def test_auc_counters_reset_with_the_startup_program():
    """Re-running the startup program zeroes the persistable counters, as in fluid."""
    feeds = {"x": np.array([[0.2, 0.8], [0.9, 0.1]], "float32"),
             "y": np.array([[1], [0]], "int64")}
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        x = fluid.data("x", [2, 2], "float32")
        y = fluid.data("y", [2, 1], "int64")
        auc_out, batch_auc, stats = fluid.layers.auc(x, y, num_thresholds=10)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.core.Scope()):
        exe.run(startup)
        for _ in range(2):
            out = exe.run(prog, feed=feeds, fetch_list=[auc_out, stats[2]])
        assert out[1].sum() == 2  # one positive per run, counted twice
        exe.run(startup)
        out = exe.run(prog, feed=feeds, fetch_list=[auc_out, stats[2]])
        assert out[1].sum() == 1
        np.testing.assert_allclose(out[0], [1.0])


# -- the ops against numpy ------------------------------------------------------------------

def auc_ref(Predict, Label, StatPos, StatNeg, num_thresholds=4095, slide_steps=1, **_):
    assert slide_steps == 0
    pos, neg = StatPos.reshape(-1).copy(), StatNeg.reshape(-1).copy()
    for score, label in zip(Predict[:, -1], Label.reshape(-1)):
        (pos if label else neg)[int(score * num_thresholds)] += 1
    tp = fp = area = 0.0
    for i in range(num_thresholds, -1, -1):
        area += neg[i] * (2 * tp + pos[i]) / 2.0
        tp, fp = tp + pos[i], fp + neg[i]
    return {"AUC": np.array([area / tp / fp]), "StatPosOut": pos.reshape(1, -1),
            "StatNegOut": neg.reshape(1, -1)}


def mean_iou_ref(Predictions, Labels, num_classes=0, **_):
    correct, wrong = np.zeros(num_classes, int), np.zeros(num_classes, int)
    for p, t in zip(Predictions.ravel(), Labels.ravel()):
        if p == t:
            correct[p] += 1
        else:
            wrong[p] += 1
            wrong[t] += 1
    denom = correct + wrong
    iou = [c / d for c, d in zip(correct, denom) if d]
    return {"OutMeanIou": np.array([np.mean(iou)], "float32"),
            "OutWrong": wrong.astype("int32"), "OutCorrect": correct.astype("int32")}


SCORES = np.random.default_rng(3).uniform(0, 1, (12, 2))
OP_CASES = [
    OpCase("auc", {"Predict": SCORES, "Label": (SCORES[:, 1:] > 0.4).astype("int64"),
                   "StatPos": np.zeros((1, 21), "int64"),
                   "StatNeg": np.arange(21, dtype="int64").reshape(1, 21) % 2},
           auc_ref, attrs={"num_thresholds": 20, "slide_steps": 0}),
]


@pytest.mark.parametrize("case", OP_CASES, ids=str)
def test_metric_op(case):
    check_forward(case, "float64")


def test_mean_iou_op():
    inputs = {"Predictions": np.array([[0, 1, 2, 2], [1, 1, 0, 3]], "int32"),
              "Labels": np.array([[0, 1, 1, 2], [1, 0, 0, 3]], "int32")}
    case = OpCase("mean_iou", inputs, None, attrs={"num_classes": 5},
                  outputs={"OutMeanIou": 1, "OutWrong": 1, "OutCorrect": 1})
    got, want = run_forward(case), mean_iou_ref(**inputs, num_classes=5)
    for slot, ref in want.items():
        assert got[slot][0].dtype == ref.dtype
        np.testing.assert_allclose(got[slot][0], ref, rtol=1e-6, err_msg=slot)


def test_mean_iou_out_of_range_class_is_reported():
    case = OpCase("mean_iou", {"Predictions": np.array([[0, 4]], "int64"),
                               "Labels": np.array([[0, 1]], "int64")}, None,
                  attrs={"num_classes": 3},
                  outputs={"OutMeanIou": 1, "OutWrong": 1, "OutCorrect": 1})
    with pytest.raises(ExecutionError, match=r"expected \[0, 3\)"):
        run_forward(case)


def test_run_case_is_deterministic():
    first, second = run_case(fluid, "auc_roc"), run_case(fluid, "auc_roc")
    for a, b in zip(first[-1], second[-1]):
        np.testing.assert_array_equal(a, b)
