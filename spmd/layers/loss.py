"""fluid.layers losses (fluid 1.8's loss.py, plus detection's sigmoid_focal_loss) and the
accuracy metric. center_loss, hsigmoid, nce and sampled_softmax_with_cross_entropy are in
loss_param.py.

>>> # loss = mean(cross_entropy(input=softmax_out, label=label))
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .logic import equal
from .loss_param import center_loss, hsigmoid, nce, sampled_softmax_with_cross_entropy
from .manip import expand
from .math_ops import matmul, reduce_mean, reduce_sum, square
from .nn import topk
from .tensor import cast, reshape, transpose

__all__ = ["accuracy", "bpr_loss", "center_loss", "cross_entropy", "hsigmoid", "huber_loss",
           "kldiv_loss", "margin_rank_loss", "mse_loss", "nce", "npair_loss", "rank_loss",
           "sampled_softmax_with_cross_entropy", "sigmoid_cross_entropy_with_logits",
           "sigmoid_focal_loss", "softmax_with_cross_entropy", "square_error_cost",
           "teacher_student_sigmoid_loss"]

_FLOATS = {"float16", "float32", "float64"}
_INTS = {"int32", "int64"}
_FLOAT_IDS = {"float32", "float64"}  # a hard label's class ids in a float variable
K_IGNORE_INDEX = -100  # fluid's kIgnoreIndex


def _check_label(input, label, soft_label: bool, where: str, axis: int = -1,
                 class_dim_dropped: bool = False):
    """Hard labels: ints with a trailing dim of 1 (or, with class_dim_dropped, as
    cross_entropy takes them, input's shape without its last dim); soft labels: floats
    shaped like input. Unknown (-1) dims are not compared, as fluid checks only known ones."""
    if soft_label:
        check_variable(label, "label", where, dtypes=_FLOATS)
        if len(label.shape) != len(input.shape) or any(
                a >= 0 and b >= 0 and a != b for a, b in zip(label.shape, input.shape)):
            raise InvalidArgumentError(
                f"{where}: with soft_label=True the label must be shaped like the input "
                f"{list(input.shape)}, got {label.name} {list(label.shape)}")
        return
    # fluid 1.8 checks no hard label's dtype: a float32 label variable fed int64 class ids
    # runs (Paddle's test_static_save_load); the kernels take whole-number floats as ids
    check_variable(label, "label", where, dtypes=_INTS | _FLOAT_IDS)
    axis = axis % input.ndim
    want = list(input.shape)
    want[axis] = 1
    if class_dim_dropped and len(label.shape) == len(want) - 1 and axis == len(want) - 1:
        if any(a >= 0 and b >= 0 and a != b for a, b in zip(label.shape, want)):
            raise InvalidArgumentError(
                f"{where}: a hard label without the class dim must have shape {want[:-1]}, "
                f"got {label.name} {list(label.shape)}")
        return
    if len(label.shape) != len(want) or label.shape[axis] != 1:
        raise InvalidArgumentError(
            f"{where}: hard labels must have shape {want} (class ids, dim {axis} of size 1), "
            f"got {label.name} {list(label.shape)}; use soft_label=True for distributions")


def cross_entropy(input, label, soft_label=False, ignore_index=K_IGNORE_INDEX):
    """-log(input[label]) per sample (input holds probabilities, e.g. a softmax output), or
    -sum(label * log(input)) with soft_label. Output shape [N, 1]. As in fluid, -log(0) is
    reported as 1e20 rather than inf, and hard labels use the cross_entropy2 op (its gradient
    keeps only the picked probabilities).

    >>> # cost = cross_entropy(input=fc_softmax [N, 10], label=y [N, 1] int64)
    """
    where = "cross_entropy"
    helper = LayerHelper("cross_entropy")
    check_variable(input, "input", where, dtypes=_FLOATS)
    _check_label(input, label, soft_label, where, class_dim_dropped=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    if soft_label:
        helper.append_op("cross_entropy", {"X": [input], "Label": [label]}, {"Y": [out]},
                         {"soft_label": True, "ignore_index": int(ignore_index)})
        return out
    xshape = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    match = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op("cross_entropy2", {"X": [input], "Label": [label]},
                     {"Y": [out], "XShape": [xshape], "MatchX": [match]},
                     {"ignore_index": int(ignore_index)})
    return out


def softmax_with_cross_entropy(logits, label, soft_label=False, ignore_index=K_IGNORE_INDEX,
                               numeric_stable_mode=True, return_softmax=False, axis=-1):
    """cross_entropy(softmax(logits), label) computed stably in one op; returns the loss
    ([N, 1]) or (loss, softmax) with return_softmax.

    With hard labels, a row whose label equals ignore_index has loss 0 and gets a zero
    gradient, as fluid 1.8's GPU kernel does. fluid 1.8.5's CPU kernel also reports loss 0
    but still gives such a row the gradient softmax - onehot(label); for a negative
    ignore_index it subtracts that 1 from the entry before the row (the previous row's last
    logit), changing a kept row's gradient. A fluid program run on CPU therefore trains on
    the ignored rows while spmd does not: spmd keeps the semantics ignore_index promises.

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
    """(input - label) ** 2, elementwise: fluid 1.8.5's elementwise_sub then square (its
    program and variable names, square_error_cost_<k>.tmp_0 / tmp_1; the fused
    square_error_cost op remains for programs that name it).

    >>> # cost = mean(square_error_cost(input=pred, label=y))
    """
    check_variable(input, "input", "square_error_cost", dtypes=_FLOATS)
    check_variable(label, "label", "square_error_cost", dtypes=_FLOATS)
    helper = LayerHelper("square_error_cost")
    minus = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("elementwise_sub", {"X": [input], "Y": [label]}, {"Out": [minus]})
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("square", {"X": [minus]}, {"Out": [out]})
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


# -- fluid 1.8's other loss layers -------------------------------------------------------------

def _loss_op(op_type: str, inputs: dict, out_slot: str, dtype, attrs=None, extra=(), name=None):
    """Append `op_type` with a fresh output in `out_slot` (and in each `extra` slot, which the
    op also writes); returns the output."""
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(dtype)
    outputs = {out_slot: [out]}
    for slot in extra:
        outputs[slot] = [helper.create_variable_for_type_inference(dtype, stop_gradient=True)]
    helper.append_op(op_type, {k: [v] for k, v in inputs.items() if v is not None}, outputs,
                     attrs or {})
    return out


def bpr_loss(input, label, name=None):
    """Bayesian personalized ranking: per row, the mean over classes j != label of
    log(1 + exp(input[j] - input[label])). input [N, C] float, label [N, 1] int64; out [N, 1].

    >>> # loss = bpr_loss(input=scores, label=item)
    """
    check_variable(input, "input", "bpr_loss", dtypes=_FLOATS)
    _check_label(input, label, False, "bpr_loss")
    return _loss_op("bpr_loss", {"X": input, "Label": label}, "Y", input.dtype, name=name)


def huber_loss(input, label, delta):
    """Elementwise Huber loss of the residual r = label - input: 0.5 r^2 where |r| <= delta,
    delta (|r| - 0.5 delta) elsewhere; shaped like input.

    >>> # loss = huber_loss(input=pred [N, 1], label=y [N, 1], delta=1.0)
    """
    check_variable(input, "input", "huber_loss", dtypes={"float32", "float64"})
    check_variable(label, "label", "huber_loss", dtypes={"float32", "float64"})
    return _loss_op("huber_loss", {"X": input, "Y": label}, "Out", input.dtype,
                    {"delta": float(delta)}, extra=("Residual",))


def kldiv_loss(x, target, reduction="mean", name=None):
    """Kullback-Leibler divergence target * (log(target) - x) with x a log-probability (0 where
    target <= 0); reduction 'none' (x's shape), 'mean', 'sum' or 'batchmean' (sum / N): [1].

    >>> # loss = kldiv_loss(x=log_probs, target=probs, reduction="batchmean")
    """
    check_variable(x, "x", "kldiv_loss", dtypes={"float32", "float64"})
    check_variable(target, "target", "kldiv_loss", dtypes={"float32", "float64"})
    if not isinstance(reduction, str):
        raise InvalidArgumentError(
            f"kldiv_loss: reduction must be a str, got {type(reduction).__name__}")
    return _loss_op("kldiv_loss", {"X": x, "Target": target}, "Loss", x.dtype,
                    {"reduction": reduction}, name=name)


def margin_rank_loss(label, left, right, margin=0.1, name=None):
    """max(0, -label * (left - right) + margin), label +1 (left ranks higher) or -1; all [N, 1].

    >>> # loss = margin_rank_loss(label=y, left=score_a, right=score_b, margin=0.1)
    """
    for arg, v in (("label", label), ("left", left), ("right", right)):
        check_variable(v, arg, "margin_rank_loss", dtypes={"float32"})
    return _loss_op("margin_rank_loss", {"Label": label, "X1": left, "X2": right}, "Out",
                    left.dtype, {"margin": float(margin)}, extra=("Activated",), name=name)


def rank_loss(label, left, right, name=None):
    """RankNet's loss log(1 + exp(left - right)) - label * (left - right); all [N, 1] float32.

    >>> # loss = rank_loss(label=p, left=score_a, right=score_b)
    """
    for arg, v in (("label", label), ("left", left), ("right", right)):
        check_variable(v, arg, "rank_loss", dtypes={"float32"})
    return _loss_op("rank_loss", {"Label": label, "Left": left, "Right": right}, "Out",
                    "float32", name=name)


def sigmoid_cross_entropy_with_logits(x, label, ignore_index=K_IGNORE_INDEX, name=None,
                                      normalize=False):
    """Elementwise logistic loss max(x, 0) - x * label + log(1 + exp(-|x|)); entries whose
    label (truncated to int) equals ignore_index give 0, and normalize divides by the number
    of entries whose label is not exactly ignore_index. As in fluid 1.8.5, a fractional label
    such as -1.5 with ignore_index=-1 is ignored (int(-1.5) == -1) yet counted.

    >>> # loss = sigmoid_cross_entropy_with_logits(x=logits, label=targets)
    """
    check_variable(x, "x", "sigmoid_cross_entropy_with_logits", dtypes=_FLOATS)
    check_variable(label, "label", "sigmoid_cross_entropy_with_logits")
    return _loss_op("sigmoid_cross_entropy_with_logits", {"X": x, "Label": label}, "Out",
                    x.dtype, {"ignore_index": int(ignore_index), "normalize": bool(normalize)},
                    name=name)


def teacher_student_sigmoid_loss(input, label, soft_max_up_bound=15.0,
                                 soft_max_lower_bound=-15.0):
    """Click loss plus teacher loss of logits [N, 1]; label encodes both: -2 (no click, no
    teacher), -1 (click, no teacher), z in [0, 1) (no click, teacher z), 1 + z (click,
    teacher z). The bounds clip the logit in the gradient, as in fluid.

    >>> # loss = teacher_student_sigmoid_loss(input=logit, label=label)
    """
    check_variable(input, "input", "teacher_student_sigmoid_loss", dtypes={"float32", "float64"})
    check_variable(label, "label", "teacher_student_sigmoid_loss", dtypes={"float32", "float64"})
    return _loss_op("teacher_student_sigmoid_loss", {"X": input, "Label": label}, "Y",
                    input.dtype, {"soft_max_up_bound": float(soft_max_up_bound),
                                  "soft_max_lower_bound": float(soft_max_lower_bound)})


def mse_loss(input, label):
    """mean((input - label) ** 2), shape [1].

    >>> # loss = mse_loss(input=pred, label=y)
    """
    check_variable(input, "input", "mse_loss", dtypes={"float32", "float64"})
    check_variable(label, "label", "mse_loss", dtypes={"float32", "float64"})
    return reduce_mean(square_error_cost(input, label))


def npair_loss(anchor, positive, labels, l2_reg=0.002):
    """N-pair loss (Sohn 2016): softmax cross entropy of anchor @ positive^T against the
    same-label matrix (rows normalized), plus l2_reg * 0.25 * the mean squared norms; [1].
    The batch size (labels.shape[0]) must be known when the program is built, as in fluid.

    >>> # loss = npair_loss(anchor=a [N, D], positive=p [N, D], labels=y [N])
    """
    check_variable(anchor, "anchor", "npair_loss", dtypes={"float32", "float64"})
    check_variable(positive, "positive", "npair_loss", dtypes={"float32", "float64"})
    check_variable(labels, "labels", "npair_loss", dtypes={"float32", "float64", "int64"})
    beta = 0.25
    n = labels.shape[0]
    if n < 0:
        raise InvalidArgumentError(
            "npair_loss: labels.shape[0] (the batch size) must be known when the program is "
            f"built, got {list(labels.shape)}; declare the data with a fixed batch size")
    lab = reshape(labels, shape=[n, 1])
    lab = expand(lab, expand_times=[1, n])
    same = cast(equal(lab, transpose(lab, perm=[1, 0])), "float32")
    same = same / reduce_sum(same, dim=1, keep_dim=True)
    l2 = (reduce_mean(reduce_sum(square(anchor), 1))
          + reduce_mean(reduce_sum(square(positive), 1))) * beta * l2_reg
    sim = matmul(anchor, positive, transpose_x=False, transpose_y=True)
    ce = softmax_with_cross_entropy(logits=sim, label=same, soft_label=True)
    return l2 + reduce_mean(reduce_sum(same * ce, 0))


def sigmoid_focal_loss(x, label, fg_num, gamma=2.0, alpha=0.25):
    """Focal loss of logits x [N, D] (D classes, background excluded): label [N, 1] int32 in
    0..D (0 = background, -1 = ignored), fg_num [1] int32 the foreground count (at least 1
    is used). Output [N, D].

    >>> # loss = sigmoid_focal_loss(x=logits, label=gt, fg_num=fg, gamma=2.0, alpha=0.25)
    """
    check_variable(x, "x", "sigmoid_focal_loss", dtypes={"float32", "float64"})
    check_variable(label, "label", "sigmoid_focal_loss", dtypes={"int32"})
    check_variable(fg_num, "fg_num", "sigmoid_focal_loss", dtypes={"int32"})
    return _loss_op("sigmoid_focal_loss", {"X": x, "Label": label, "FgNum": fg_num}, "Out",
                    x.dtype, {"gamma": float(gamma), "alpha": float(alpha)})
