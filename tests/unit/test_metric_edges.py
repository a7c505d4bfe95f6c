"""fluid.metrics at the edges, against what fluid 1.8.5's classes do (stored by
tests/oracle/make_metrics.py): eval() before any update returns fluid's value or raises the
exception type fluid raises (ValueError for Accuracy and EditDistance), MetricBase's
update()/eval() raise NotImplementedError, and the binary Precision / Recall refuse
two-column predictions. spmd's messages say what to do instead."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_metrics import EDGE_CASES, run_edge
from oracle_io import load

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

ORACLE = load("metrics")

# what spmd's message says in each raising case
MESSAGES = {
    "accuracy_eval_empty": "no data yet; call update",
    "edit_distance_eval_empty": "no data yet; call update",
    "base_update": "base class; use a concrete metric",
    "base_eval": "base class; use a concrete metric",
    "precision_two_columns": r"one prediction .* preds\[:, 1:2\]",
    "recall_two_columns": r"one prediction .* preds\[:, 1:2\]",
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_case_matches_fluid(name):
    want = ORACLE[name]
    if "value" in want:
        assert run_edge(fluid.metrics, name) == want, name
        return
    cls, kwargs, method, args = EDGE_CASES[name]
    metric = getattr(fluid.metrics, cls)(**kwargs)
    with pytest.raises(Exception, match=MESSAGES[name]) as info:
        getattr(metric, method)(*args)
    bases = {c.__name__ for c in type(info.value).__mro__}
    assert want["raises"] in bases, f"{name}: spmd raised {type(info.value).__name__}, " \
                                    f"fluid {want['raises']}"


def test_every_raising_case_has_a_message():
    assert {n for n, w in ORACLE.items() if "raises" in w} == set(MESSAGES)


def test_precision_and_recall_take_one_column():
    """[N], [N, 1] and the positive column of [N, 2] probabilities give the same counts."""
    probs = np.array([[0.2, 0.8], [0.9, 0.1], [0.4, 0.6], [0.3, 0.7]])
    labels = np.array([[1], [0], [0], [1]])
    for cls in (fluid.metrics.Precision, fluid.metrics.Recall):
        results = []
        for preds in (probs[:, 1], probs[:, 1:2]):
            m = cls()
            m.update(preds, labels)
            results.append(m.eval())
        assert results == [results[0]] * 2 and results[0] > 0


def test_fewer_predictions_than_labels_is_named():
    with pytest.raises(ValueError, match="2 predictions for 3 labels"):
        fluid.metrics.Precision().update(np.array([[1.0], [0.0]]), np.array([[1], [0], [1]]))


def test_auc_needs_two_columns():
    """fluid fails with an IndexError on [N, 1] predictions; spmd says what to pass."""
    with pytest.raises(ValueError, match=r"np.concatenate\(\[1 - p, p\], axis=1\)"):
        fluid.metrics.Auc("auc").update(np.array([[0.3], [0.8]]), np.array([[0], [1]]))


def test_detection_map_names_its_arguments():
    """fluid.metrics.DetectionMAP builds detection_map ops (tests/unit/test_ops_detection_ssd
    _oracle.py checks its numbers); arguments that are not Variables are named."""
    assert "DetectionMAP" in fluid.metrics.__all__
    with pytest.raises(InvalidArgumentError, match="input must be a Variable"):
        fluid.metrics.DetectionMAP(None, None, None, class_num=3)
