"""fluid.metrics: evaluators that accumulate a metric over mini-batches on the host, from the
numpy arrays a program fetched (as fluid 1.8's do): MetricBase, CompositeMetric, Precision,
Recall, Accuracy, ChunkEvaluator, EditDistance, Auc.

>>> import numpy as np
>>> acc = Accuracy()
>>> acc.update(value=0.5, weight=4)
>>> acc.update(value=1.0, weight=4)
>>> acc.eval()
0.75
"""
from __future__ import annotations

import copy
import numbers

import numpy as np

from .errors import InvalidArgumentError

__all__ = ["MetricBase", "CompositeMetric", "Precision", "Recall", "Accuracy",
           "ChunkEvaluator", "EditDistance", "Auc"]


def _is_numpy(value) -> bool:
    return isinstance(value, (np.ndarray, np.generic))


def _is_number(value) -> bool:
    """fluid's test: a Python int or float, a numpy int64, or a numpy array of shape [1]."""
    return (isinstance(value, (int, float, np.int64)) and not isinstance(value, bool)
            or isinstance(value, np.ndarray) and value.shape == (1,))


def _is_number_or_matrix(value) -> bool:
    return _is_number(value) or isinstance(value, np.ndarray)


def _float(value) -> float:
    """float() of a number or a one-element array (numpy 2 refuses float() of shape [1])."""
    return float(np.asarray(value).reshape(-1)[0])


def _need(ok: bool, message: str):
    if not ok:
        raise InvalidArgumentError(message)


class MetricBase:
    """Base of the metrics: a name and states (the attributes without a leading underscore),
    which reset() zeroes by type (int 0, float 0.0, numpy arrays zeros, anything else None).
    Subclasses implement update(...) and eval().

    >>> class Count(MetricBase):
    ...     def __init__(self, name=None):
    ...         super().__init__(name)
    ...         self.n = 0
    ...     def update(self, preds, labels):
    ...         self.n += len(labels)
    ...     def eval(self):
    ...         return self.n
    """

    def __init__(self, name):
        self._name = str(name) if name is not None else self.__class__.__name__

    def __str__(self):
        return self._name

    def _states(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def reset(self):
        """Zero every state, keeping its type."""
        for attr, value in self._states().items():
            if isinstance(value, int):
                setattr(self, attr, 0)
            elif isinstance(value, float):
                setattr(self, attr, 0.0)
            elif isinstance(value, (np.ndarray, np.generic)):
                setattr(self, attr, np.zeros_like(value))
            else:
                setattr(self, attr, None)

    def get_config(self) -> dict:
        """{"name": the metric's name, "states": a deep copy of its states}."""
        return {"name": self._name, "states": copy.deepcopy(self._states())}

    def update(self, preds, labels):
        """Accumulate one mini-batch; every concrete metric defines it (NotImplementedError
        here, as in fluid)."""
        raise NotImplementedError(
            f"{type(self).__name__}.update: MetricBase is a base class; use a concrete metric "
            f"(Accuracy, Precision, Recall, Auc, ...) or define update() in a subclass")

    def eval(self):
        """The metric over every batch so far; every concrete metric defines it
        (NotImplementedError here, as in fluid)."""
        raise NotImplementedError(
            f"{type(self).__name__}.eval: MetricBase is a base class; use a concrete metric "
            f"(Accuracy, Precision, Recall, Auc, ...) or define eval() in a subclass")


class CompositeMetric(MetricBase):
    """Several metrics updated with the same (preds, labels); eval() returns their results in
    the order they were added.

    >>> comp = CompositeMetric()
    >>> comp.add_metric(Precision())
    >>> comp.add_metric(Recall())
    >>> comp.update(np.array([[1], [0], [1]]), np.array([[1], [1], [0]]))
    >>> comp.eval()
    [0.5, 0.5]
    """

    def __init__(self, name=None):
        super().__init__(name)
        self._metrics = []

    def add_metric(self, metric):
        _need(isinstance(metric, MetricBase),
              f"CompositeMetric.add_metric: expected a MetricBase, got {type(metric).__name__}")
        self._metrics.append(metric)

    def update(self, preds, labels):
        for m in self._metrics:
            m.update(preds, labels)

    def eval(self):
        return [m.eval() for m in self._metrics]


def _binary_counts(preds, labels, where: str):
    """(rounded prediction, label) per sample: one value each, as fluid compares them."""
    _need(_is_numpy(preds), f"{where}: 'preds' must be a numpy ndarray, got "
                            f"{type(preds).__name__}")
    _need(_is_numpy(labels), f"{where}: 'labels' must be a numpy ndarray, got "
                             f"{type(labels).__name__}")
    labels = np.asarray(labels)
    n = labels.shape[0] if labels.ndim else 1
    preds = np.asarray(preds).reshape(len(preds) if np.ndim(preds) else 1, -1)
    labels = labels.reshape(n, -1)
    # fluid compares one value per sample and fails on a two-column (softmax) prediction
    _need(preds.shape[1] == 1 and labels.shape[1] == 1,
          f"{where}: the metric is binary and takes one prediction and one label per sample "
          f"([N] or [N, 1]), got preds {list(np.shape(preds))} and labels "
          f"{list(labels.shape)}; for [N, 2] class probabilities pass the positive column, "
          f"preds[:, 1:2]")
    _need(preds.shape[0] >= n, f"{where}: {preds.shape[0]} predictions for {n} labels; give "
                               f"one prediction per label")
    # fluid rounds the predictions and compares them with the labels one sample at a time
    return np.rint(preds[:n, 0]).astype("int32"), labels[:, 0]


class Precision(MetricBase):
    """Binary precision tp / (tp + fp); preds are rounded to 0/1, labels are 0/1 ([N] or
    [N, 1]; two-column predictions are refused, as fluid fails on them). 0.0 before any
    positive prediction.

    >>> p = Precision()
    >>> p.update(preds=np.array([[0.9], [0.2], [0.7]]), labels=np.array([[1], [0], [0]]))
    >>> p.eval()
    0.5
    """

    def __init__(self, name=None):
        super().__init__(name)
        self.tp = 0
        self.fp = 0

    def update(self, preds, labels):
        pred, label = _binary_counts(preds, labels, "Precision.update")
        predicted = pred == 1
        self.tp += int((predicted & (label == 1)).sum())
        self.fp += int((predicted & (label != 1)).sum())

    def eval(self):
        ap = self.tp + self.fp
        return float(self.tp) / ap if ap != 0 else 0.0


class Recall(MetricBase):
    """Binary recall tp / (tp + fn); preds are rounded to 0/1, labels are 0/1 ([N] or [N, 1];
    two-column predictions are refused, as fluid fails on them). 0.0 before any positive
    label.

    >>> r = Recall()
    >>> r.update(preds=np.array([[0.9], [0.2], [0.7]]), labels=np.array([[1], [1], [0]]))
    >>> r.eval()
    0.5
    """

    def __init__(self, name=None):
        super().__init__(name)
        self.tp = 0
        self.fn = 0

    def update(self, preds, labels):
        pred, label = _binary_counts(preds, labels, "Recall.update")
        actual = label == 1
        self.tp += int((actual & (pred == 1)).sum())
        self.fn += int((actual & (pred != 1)).sum())

    def eval(self):
        total = self.tp + self.fn
        return float(self.tp) / total if total != 0 else 0.0


class Accuracy(MetricBase):
    """The weighted mean of per-batch accuracies: update(value, weight) with value a batch's
    accuracy (e.g. fetched from layers.accuracy) and weight its sample count.

    >>> acc = Accuracy()
    >>> acc.update(value=np.array([0.5]), weight=2)
    >>> acc.eval()
    array([0.5])
    """

    def __init__(self, name=None):
        super().__init__(name)
        self.value = 0.0
        self.weight = 0.0

    def update(self, value, weight):
        _need(_is_number_or_matrix(value),
              f"Accuracy.update: 'value' must be a number (int, float) or a numpy ndarray, got "
              f"{type(value).__name__}")
        _need(_is_number(weight),
              f"Accuracy.update: 'weight' must be a number (int, float), got "
              f"{type(weight).__name__}")
        _need(not weight < 0, f"Accuracy.update: 'weight' can not be negative, got {weight}")
        self.value += value * weight
        self.weight += weight

    def eval(self):
        """The weighted mean; ValueError (as in fluid) before any update with weight > 0."""
        if self.weight == 0:
            raise InvalidArgumentError(
                "Accuracy.eval: there is no data yet; call update(value, weight) with the "
                "batch accuracy that layers.accuracy returned first")
        return self.value / self.weight


class ChunkEvaluator(MetricBase):
    """Precision, recall and F1 of chunks accumulated from chunk_eval-style counts:
    update(num_infer_chunks, num_label_chunks, num_correct_chunks).

    >>> ce = ChunkEvaluator()
    >>> ce.update(4, 5, 3)
    >>> [round(v, 4) for v in ce.eval()]
    [0.75, 0.6, 0.6667]
    """

    def __init__(self, name=None):
        super().__init__(name)
        self.num_infer_chunks = 0
        self.num_label_chunks = 0
        self.num_correct_chunks = 0

    def update(self, num_infer_chunks, num_label_chunks, num_correct_chunks):
        for arg, v in (("num_infer_chunks", num_infer_chunks),
                       ("num_label_chunks", num_label_chunks),
                       ("num_correct_chunks", num_correct_chunks)):
            _need(_is_number_or_matrix(v), f"ChunkEvaluator.update: '{arg}' must be a number "
                                           f"or a numpy ndarray, got {type(v).__name__}")
        self.num_infer_chunks += num_infer_chunks
        self.num_label_chunks += num_label_chunks
        self.num_correct_chunks += num_correct_chunks

    def eval(self):
        correct = self.num_correct_chunks
        # an array count gives an array result, as in fluid
        precision = _float(correct) / self.num_infer_chunks if self.num_infer_chunks else 0
        recall = _float(correct) / self.num_label_chunks if self.num_label_chunks else 0
        f1 = _float(2 * precision * recall) / (precision + recall) if correct else 0
        return precision, recall, f1


class EditDistance(MetricBase):
    """Average edit distance and instance error rate of sequences: update(distances [N, 1],
    seq_num) with what layers.edit_distance returns.

    >>> ed = EditDistance("ed")
    >>> ed.update(np.array([[0.0], [2.0], [1.0]]), 3)
    >>> [float(v) for v in ed.eval()]
    [1.0, 0.6666666666666666]
    """

    def __init__(self, name):
        super().__init__(name)
        self.total_distance = 0.0
        self.seq_num = 0
        self.instance_error = 0

    def update(self, distances, seq_num):
        _need(_is_numpy(distances), f"EditDistance.update: 'distances' must be a numpy "
                                    f"ndarray, got {type(distances).__name__}")
        _need(_is_number(seq_num), f"EditDistance.update: 'seq_num' must be a number (int, "
                                   f"float), got {type(seq_num).__name__}")
        right = np.sum(distances == 0)
        self.seq_num += seq_num
        self.instance_error += seq_num - right
        self.total_distance += np.sum(distances)

    def eval(self):
        """(average distance, instance error rate); ValueError (as in fluid) before any
        update."""
        if self.seq_num == 0:
            raise InvalidArgumentError(
                "EditDistance.eval: there is no data yet; call update(distances, seq_num) "
                "with what layers.edit_distance returned first")
        return self.total_distance / self.seq_num, self.instance_error / _float(self.seq_num)


class Auc(MetricBase):
    """Area under the ROC curve on the host: scores preds[:, 1] (probabilities [N, 2]) are
    bucketed into num_thresholds + 1 bins by int(score * num_thresholds). fluid 1.8 accepts
    curve='PR' and computes the ROC area for it as well; spmd does the same.

    >>> auc = Auc("auc", num_thresholds=100)
    >>> auc.update(np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]), np.array([[0], [1], [1]]))
    >>> auc.eval()
    1.0
    """

    def __init__(self, name, curve="ROC", num_thresholds=4095):
        super().__init__(name=name)
        _need(isinstance(num_thresholds, numbers.Integral) and num_thresholds >= 1,
              f"Auc: num_thresholds must be an int >= 1, got {num_thresholds!r}")
        self._curve = curve
        self._num_thresholds = int(num_thresholds)
        self._stat_pos = [0] * (self._num_thresholds + 1)
        self._stat_neg = [0] * (self._num_thresholds + 1)

    def update(self, preds, labels):
        _need(_is_numpy(labels), f"Auc.update: 'labels' must be a numpy ndarray, got "
                                 f"{type(labels).__name__}")
        _need(_is_numpy(preds), f"Auc.update: 'preds' must be a numpy ndarray, got "
                                f"{type(preds).__name__}")
        # fluid reads preds[i, 1] for each label i (the positive class of [N, 2] softmax
        # output); say so instead of failing with numpy's IndexError
        _need(np.ndim(preds) == 2 and np.shape(preds)[1] >= 2
              and np.shape(preds)[0] >= len(labels),
              f"Auc.update: preds must be [N, 2] class probabilities (column 1 the positive "
              f"class) with a row per label, got preds {list(np.shape(preds))} for "
              f"{len(labels)} labels; for a sigmoid output p [N, 1] pass "
              f"np.concatenate([1 - p, p], axis=1)")
        n = self._num_thresholds
        for i, label in enumerate(labels):
            score = preds[i, 1]
            bucket = int(score * n)
            _need(0 <= bucket <= n, f"Auc.update: preds[{i}, 1] = {score} is not a "
                                    f"probability in [0, 1]")
            if label:
                self._stat_pos[bucket] += 1.0
            else:
                self._stat_neg[bucket] += 1.0

    @staticmethod
    def trapezoid_area(x1, x2, y1, y2):
        return abs(x1 - x2) * (y1 + y2) / 2.0

    def eval(self):
        tot_pos = tot_neg = area = 0.0
        for idx in range(self._num_thresholds, -1, -1):
            prev_pos, prev_neg = tot_pos, tot_neg
            tot_pos += self._stat_pos[idx]
            tot_neg += self._stat_neg[idx]
            area += self.trapezoid_area(tot_neg, prev_neg, tot_pos, prev_pos)
        return area / tot_pos / tot_neg if tot_pos > 0.0 and tot_neg > 0.0 else 0.0
