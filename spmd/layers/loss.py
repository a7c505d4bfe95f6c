"""fluid.layers losses and metrics: cross_entropy, softmax_with_cross_entropy,
square_error_cost, accuracy.

>>> # loss = mean(cross_entropy(input=softmax_out, label=label))
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from ..ops.registry import get_op_def
from .helper import LayerHelper, check_variable
from .nn import topk

__all__ = ["accuracy", "cross_entropy", "softmax_with_cross_entropy", "square_error_cost"]

_FLOATS = {"float16", "float32", "float64"}
_INTS = {"int32", "int64"}
K_IGNORE_INDEX = -100  # fluid's kIgnoreIndex


def _check_label(input, label, soft_label: bool, where: str, axis: int = -1):
    """Hard labels: ints with a trailing dim of 1; soft labels: floats shaped like input."""
    if soft_label:
        check_variable(label, "label", where, dtypes=_FLOATS)
        if len(label.shape) != len(input.shape) or any(
                a >= 0 and b >= 0 and a != b for a, b in zip(label.shape, input.shape)):
            raise InvalidArgumentError(
                f"{where}: with soft_label=True the label must be shaped like the input "
                f"{list(input.shape)}, got {label.name} {list(label.shape)}")
        return
    check_variable(label, "label", where, dtypes=_INTS)
    axis = axis % input.ndim
    want = list(input.shape)
    want[axis] = 1
    if len(label.shape) != len(want) or label.shape[axis] != 1:
        raise InvalidArgumentError(
            f"{where}: hard labels must have shape {want} (class ids, dim {axis} of size 1), "
            f"got {label.name} {list(label.shape)}; use soft_label=True for distributions")


def cross_entropy(input, label, soft_label=False, ignore_index=K_IGNORE_INDEX):
    """-log(input[label]) per sample (input holds probabilities, e.g. a softmax output), or
    -sum(label * log(input)) with soft_label. Output shape [N, 1].

    >>> # cost = cross_entropy(input=fc_softmax [N, 10], label=y [N, 1] int64)
    """
    where = "cross_entropy"
    helper = LayerHelper("cross_entropy")
    check_variable(input, "input", where, dtypes=_FLOATS)
    _check_label(input, label, soft_label, where)
    out = helper.create_variable_for_type_inference(input.dtype)
    # fluid's cross_entropy op names its output Y; accept an Out-named definition as well
    out_slot = "Y" if "Y" in get_op_def("cross_entropy").output_slots else "Out"
    helper.append_op("cross_entropy", {"X": [input], "Label": [label]}, {out_slot: [out]},
                     {"soft_label": bool(soft_label), "ignore_index": int(ignore_index)})
    return out


def softmax_with_cross_entropy(logits, label, soft_label=False, ignore_index=K_IGNORE_INDEX,
                               numeric_stable_mode=True, return_softmax=False, axis=-1):
    """cross_entropy(softmax(logits), label) computed stably in one op; returns the loss
    ([N, 1]) or (loss, softmax) with return_softmax.

    >>> # loss = softmax_with_cross_entropy(logits [N, 10], label [N, 1] int64)
    """
    where = "softmax_with_cross_entropy"
    helper = LayerHelper("softmax_with_cross_entropy")
    check_variable(logits, "logits", where, dtypes=_FLOATS)
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or not (
            -logits.ndim <= axis < logits.ndim):
        raise InvalidArgumentError(
            f"{where}: axis={axis!r} is out of range for logits of rank {logits.ndim}")
    _check_label(logits, label, soft_label, where, axis)
    softmax = helper.create_variable_for_type_inference(logits.dtype)
    loss = helper.create_variable_for_type_inference(logits.dtype)
    helper.append_op("softmax_with_cross_entropy", {"Logits": [logits], "Label": [label]},
                     {"Softmax": [softmax], "Loss": [loss]},
                     {"soft_label": bool(soft_label), "ignore_index": int(ignore_index),
                      "numeric_stable_mode": bool(numeric_stable_mode), "axis": int(axis)})
    return (loss, softmax) if return_softmax else loss


def square_error_cost(input, label):
    """(input - label) ** 2, elementwise.

    >>> # cost = mean(square_error_cost(input=pred, label=y))
    """
    check_variable(input, "input", "square_error_cost", dtypes=_FLOATS)
    check_variable(label, "label", "square_error_cost", dtypes=_FLOATS)
    helper = LayerHelper("square_error_cost")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("square_error_cost", {"X": [input], "Y": [label]}, {"Out": [out]})
    return out


def accuracy(input, label, k=1, correct=None, total=None):
    """Fraction of samples whose label is among the top-k scores of `input` ([N, C]); shape
    [1], float32. `correct` and `total` (int32 [1]) receive the counts when given.

    >>> # acc = accuracy(input=prediction, label=y, k=1)
    """
    where = "accuracy"
    helper = LayerHelper("accuracy")
    check_variable(input, "input", where)
    check_variable(label, "label", where, dtypes=_INTS)
    values, indices = topk(input, k=k)
    acc = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    if correct is None:
        correct = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    if total is None:
        total = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("accuracy", {"Out": [values], "Indices": [indices], "Label": [label]},
                     {"Accuracy": [acc], "Correct": [correct], "Total": [total]})
    return acc
