"""How fluid 1.8's fluid.metrics classes answer the edge cases: eval() before any update,
the base class's update()/eval(), and two-column predictions given to the binary Precision /
Recall; for tests/unit/test_metric_edges.py. Each case stores the value returned, or the
exception raised (its class and the names of its bases). Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_metrics.py
"""
import os
import sys

import numpy as np

_PREDS2 = np.array([[0.2, 0.8], [0.9, 0.1], [0.4, 0.6]])
_LABELS = np.array([[1], [0], [1]])

# name -> (class, constructor kwargs, method, the method's arguments)
EDGE_CASES = {
    "accuracy_eval_empty": ("Accuracy", {}, "eval", ()),
    "edit_distance_eval_empty": ("EditDistance", {"name": "ed"}, "eval", ()),
    "precision_eval_empty": ("Precision", {}, "eval", ()),
    "recall_eval_empty": ("Recall", {}, "eval", ()),
    "chunk_eval_empty": ("ChunkEvaluator", {}, "eval", ()),
    "auc_eval_empty": ("Auc", {"name": "auc"}, "eval", ()),
    "composite_eval_empty": ("CompositeMetric", {}, "eval", ()),
    "base_update": ("MetricBase", {"name": "m"}, "update", (_PREDS2, _LABELS)),
    "base_eval": ("MetricBase", {"name": "m"}, "eval", ()),
    "precision_two_columns": ("Precision", {}, "update", (_PREDS2, _LABELS)),
    "recall_two_columns": ("Recall", {}, "update", (_PREDS2, _LABELS)),
}


def run_edge(metrics, name):
    """{"value": what the call returned} or {"raises": exception class, "bases": [names]}."""
    cls, kwargs, method, args = EDGE_CASES[name]
    metric = getattr(metrics, cls)(**kwargs)
    try:
        value = getattr(metric, method)(*args)
    except Exception as e:  # the oracle records whatever fluid raises
        return {"raises": type(e).__name__,
                "bases": sorted(c.__name__ for c in type(e).__mro__)}
    return {"value": list(value) if isinstance(value, tuple) else value}


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    save("metrics", {name: run_edge(fluid.metrics, name) for name in sorted(EDGE_CASES)},
         meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
