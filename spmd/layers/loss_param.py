"""fluid.layers losses that own parameters or samplers: center_loss, hsigmoid, nce,
sampled_softmax_with_cross_entropy (re-exported by loss.py, which lists them in __all__).

>>> # loss = center_loss(input=feat, label=y, num_classes=10, alpha=0.5, param_attr=attr)
"""
from __future__ import annotations

import numbers

import numpy as np

from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .initializer import ConstantInitializer, Initializer
from .param_attr import ParamAttr

_INTS = {"int32", "int64"}


def center_loss(input, label, num_classes, alpha, param_attr, update_center=True):
    """Center loss (Wen et al. 2016): 0.5 * ||input - centers[label]||^2 per sample ([N, 1]).

    The centers ([num_classes, D], from param_attr) get no gradient; with update_center each
    step moves them by alpha * sum(input - center of its samples) / (1 + their count). alpha
    is a float (kept in the persistable variable `centerloss_alpha`, as in fluid) or a
    Variable of shape [1].

    >>> # loss = center_loss(feat, y, num_classes=10, alpha=0.1, param_attr=ParamAttr("c"))
    """
    helper = LayerHelper("center_loss", param_attr=param_attr)
    check_variable(input, "input", "center_loss", dtypes={"float32", "float64"})
    check_variable(label, "label", "center_loss", dtypes=_INTS)
    if len(input.shape) != 2:
        raise InvalidArgumentError(
            f"center_loss: input must be [N, D], got {input.name} {list(input.shape)}")
    centers = helper.create_parameter(helper.param_attr, [int(num_classes), input.shape[1]],
                                      input.dtype)
    centers.stop_gradient = True
    if hasattr(alpha, "dtype") and hasattr(alpha, "shape"):
        rate = alpha
    elif isinstance(alpha, numbers.Real) and not isinstance(alpha, bool):
        rate = helper.create_global_variable([1], "float32", persistable=True,
                                             name="centerloss_alpha", stop_gradient=True)
        helper.set_variable_initializer(rate, ConstantInitializer(float(alpha)))
    else:
        raise InvalidArgumentError(
            f"center_loss: alpha must be a float or a Variable of shape [1], got {alpha!r}")
    diff = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    loss = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("center_loss",
                     {"X": [input], "Label": [label], "Centers": [centers],
                      "CenterUpdateRate": [rate]},
                     {"SampleCenterDiff": [diff], "Loss": [loss], "CentersOut": [centers]},
                     {"cluster_num": int(num_classes), "need_update": bool(update_center)})
    return loss


class _ArrayInitializer(Initializer):
    """Fills a variable with a fixed numpy array (assign_value), for nce's sampler tables."""

    _ATTR = {"float32": "fp32_values", "int32": "int32_values"}

    def __init__(self, array):
        self.array = np.asarray(array)

    def __call__(self, var, block):
        attr = self._ATTR[self.array.dtype.name]
        return block._prepend_op("assign_value", outputs={"Out": [var]},
                                 attrs={"shape": list(self.array.shape),
                                        "dtype": self.array.dtype.name,
                                        attr: self.array.reshape(-1).tolist()})


def _check_bool_like(value, arg: str, where: str):
    if not isinstance(value, (bool, int)):
        raise InvalidArgumentError(f"{where}: {arg} must be a bool, got {value!r}")


def hsigmoid(input, label, num_classes, param_attr=None, bias_attr=None, name=None,
             path_table=None, path_code=None, is_custom=False, is_sparse=False):
    """Hierarchical sigmoid loss ([N, 1]) over a binary tree of the classes.

    The default tree (is_custom=False) numbers class c's path by the bits of c + num_classes
    and has num_classes - 1 nodes, so W is [num_classes - 1, D] (and the bias
    [num_classes - 1, 1]). A custom tree gives each sample its path: path_table [N, L] (node
    ids, -1 ends the path) and path_code [N, L] (the branch bits), with W [num_classes, D].
    is_sparse is accepted (fluid's sparse-gradient option); spmd's gradient is dense.

    >>> # cost = hsigmoid(input=feat [N, D], label=y [N, 1], num_classes=1000)
    """
    where = "hsigmoid"
    check_variable(input, "input", where, dtypes={"float32", "float64"})
    check_variable(label, "label", where, dtypes={"int64"})
    _check_bool_like(is_custom, "is_custom", where)
    _check_bool_like(is_sparse, "is_sparse", where)
    if not is_custom:
        if num_classes is None or num_classes < 2:
            raise InvalidArgumentError(
                f"{where}: num_classes must be >= 2 with the default tree, got {num_classes!r}")
        if path_table is not None or path_code is not None:
            raise InvalidArgumentError(
                f"{where}: path_table / path_code describe a custom tree; pass is_custom=True "
                f"with them, or only num_classes for the default tree")
        is_sparse = False  # fluid: sparse mode needs a custom tree
    elif path_table is None or path_code is None or num_classes is None:
        raise InvalidArgumentError(
            f"{where}: is_custom=True needs path_table, path_code and num_classes")
    helper = LayerHelper("hierarchical_sigmoid", param_attr=param_attr, bias_attr=bias_attr,
                         name=name)
    nodes = int(num_classes) if is_custom else int(num_classes) - 1
    dtype = input.dtype
    weights = helper.create_parameter(helper.param_attr, [nodes, input.shape[1]], dtype)
    inputs = {"X": [input], "W": [weights], "Label": [label]}
    if is_custom:
        inputs["PathTable"] = [path_table]
        inputs["PathCode"] = [path_code]
    if helper.bias_attr is not False:
        inputs["Bias"] = [helper.create_parameter(helper.bias_attr, [nodes, 1], dtype,
                                                  is_bias=True)]
    out = helper.create_variable_for_type_inference(dtype)
    pre_out = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("hierarchical_sigmoid", inputs,
                     {"Out": [out], "PreOut": [pre_out], "W_Out": [weights]},
                     {"num_classes": int(num_classes), "is_sparse": bool(is_sparse),
                      "remote_prefetch": bool(is_sparse)})
    return out


_NCE_SAMPLERS = {"uniform": 0, "log_uniform": 1, "custom_dist": 2}


def _alias_table(probs):
    """Walker's alias table of a distribution: (alias ids, the probability of keeping the
    drawn bucket), -1 / 1.0 for a bucket that keeps all its mass."""
    n = len(probs)
    scaled = [float(p) * n for p in probs]
    alias, keep = [-1] * n, [1.0] * n
    small = [i for i, p in enumerate(scaled) if p < 1.0]
    large = [i for i, p in enumerate(scaled) if p > 1.0]
    while small and large:
        s, big = small.pop(), large[-1]
        keep[s], alias[s] = scaled[s], big
        scaled[big] -= 1.0 - scaled[s]
        if scaled[big] < 1.0:
            small.append(large.pop())
    return alias, keep


def _fixed_param(helper, array):
    """A non-trainable parameter holding `array` (fluid's nce keeps its sampler tables so)."""
    param = helper.create_parameter(ParamAttr(), list(array.shape), array.dtype.name,
                                    default_initializer=_ArrayInitializer(array))
    param.stop_gradient = True
    return param


def nce(input, label, num_total_classes, sample_weight=None, param_attr=None, bias_attr=None,
        num_neg_samples=None, name=None, sampler="uniform", custom_dist=None, seed=0,
        is_sparse=False):
    """Noise-contrastive estimation loss ([N, 1]): each sample's true classes (label
    [N, num_true] int64) against num_neg_samples (default 10) negatives drawn by `sampler`
    ('uniform', 'log_uniform' or 'custom_dist' with the probabilities custom_dist), divided
    by num_neg_samples + 1 as in fluid. The weight is [num_total_classes, D], the bias
    [num_total_classes, 1]. A non-zero seed draws the same negatives at every step; seed 0
    uses the program's generator (random_seed). is_sparse is accepted (dense gradient).

    >>> # cost = nce(input=emb [N, D], label=word [N, 1], num_total_classes=10000)
    """
    where = "nce"
    check_variable(input, "input", where, dtypes={"float32", "float64"})
    check_variable(label, "label", where, dtypes={"int64"})
    if sampler not in _NCE_SAMPLERS:
        raise InvalidArgumentError(
            f"{where}: sampler must be one of {sorted(_NCE_SAMPLERS)}, got {sampler!r}")
    k = int(num_total_classes)
    helper = LayerHelper("nce", param_attr=param_attr, bias_attr=bias_attr, name=name)
    w = helper.create_parameter(helper.param_attr, [k, input.shape[1]], input.dtype)
    inputs = {"Input": [input], "Label": [label], "Weight": [w]}
    if helper.bias_attr is not False:
        inputs["Bias"] = [helper.create_parameter(helper.bias_attr, [k, 1], input.dtype,
                                                  is_bias=True)]
    if sample_weight is not None:
        inputs["SampleWeight"] = [check_variable(sample_weight, "sample_weight", where)]
    if sampler == "custom_dist":
        probs = np.asarray(custom_dist if custom_dist is not None else [], dtype=np.float64)
        if probs.shape != (k,) or (probs < 0).any() or not np.isclose(probs.sum(), 1.0):
            raise InvalidArgumentError(
                f"{where}: sampler='custom_dist' needs custom_dist, {k} probabilities (one per "
                f"class) summing to 1, got {custom_dist!r}")
        alias, keep = _alias_table(probs)
        inputs["CustomDistProbs"] = [_fixed_param(helper, probs.astype("float32"))]
        inputs["CustomDistAlias"] = [_fixed_param(helper, np.asarray(alias, "int32"))]
        inputs["CustomDistAliasProbs"] = [_fixed_param(helper, np.asarray(keep, "float32"))]
    neg = 10 if num_neg_samples is None else int(num_neg_samples)
    cost = helper.create_variable_for_type_inference(input.dtype)
    logits = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    labels = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("nce", inputs,
                     {"Cost": [cost], "SampleLogits": [logits], "SampleLabels": [labels]},
                     {"num_total_classes": k, "num_neg_samples": neg, "seed": int(seed),
                      "sampler": _NCE_SAMPLERS[sampler], "is_sparse": bool(is_sparse),
                      "remote_prefetch": bool(is_sparse)})
    return cost / (neg + 1)


def sampled_softmax_with_cross_entropy(logits, label, num_samples, num_true=1,
                                       remove_accidental_hits=True,
                                       use_customized_samples=False, customized_samples=None,
                                       customized_probabilities=None, seed=0):
    """Softmax cross entropy over the true classes and num_samples sampled ones ([N, 1]).

    Negatives are drawn log-uniformly without replacement, shared by the batch (or given:
    use_customized_samples with customized_samples [N, num_true + S] int64, the true labels
    first, and customized_probabilities of the same shape). Each sampled logit is corrected
    by -log(its probability); a negative equal to a true label is pushed down by 1e20 when
    remove_accidental_hits. num_true must be 1: fluid 1.8's layer builds for nothing else.

    With spmd's own sampler the "probability" of a class with log-uniform mass q is fluid's:
    q * num_samples when the num_samples draws held no repeat, else 1 - (1 - q)^tries, with
    tries the number of draws it took to find num_samples distinct classes.

    >>> # loss = sampled_softmax_with_cross_entropy(logits [N, K], label [N, 1], num_samples=25)
    """
    where = "sampled_softmax_with_cross_entropy"
    check_variable(logits, "logits", where, dtypes={"float32", "float64"})
    check_variable(label, "label", where, dtypes={"int64"})
    # fluid 1.8.5 builds this layer only for one true label per row: it one-hot encodes the
    # sampled label to num_samples + 1 classes, which misses the num_true + num_samples
    # sampled logits otherwise, and its softmax_with_cross_entropy refuses the program
    if num_true != 1 or (len(label.shape) == 2 and label.shape[1] not in (1, -1)):
        raise InvalidArgumentError(
            f"{where}: only one true label per row is supported (num_true=1, label [N, 1]), "
            f"as in fluid 1.8, whose layer fails to build otherwise; got num_true={num_true!r}"
            f" and label {list(label.shape)}")
    helper = LayerHelper("sample_logits")
    inputs = {"Logits": [logits], "Labels": [label]}
    if use_customized_samples:
        if customized_samples is None or customized_probabilities is None:
            raise InvalidArgumentError(
                f"{where}: use_customized_samples=True needs customized_samples and "
                f"customized_probabilities")
        inputs["CustomizedSamples"] = [customized_samples]
        inputs["CustomizedProbabilities"] = [customized_probabilities]

    def tmp(dtype):
        return helper.create_variable_for_type_inference(dtype, stop_gradient=True)

    sampled_logits = helper.create_variable_for_type_inference(logits.dtype)
    sampled_label = tmp("int64")
    helper.append_op("sample_logits", inputs,
                     {"Samples": [tmp("int64")], "Probabilities": [tmp(logits.dtype)],
                      "SampledLabels": [sampled_label], "SampledLogits": [sampled_logits],
                      "LogitsDim": [tmp("int64")], "LabelsDim": [tmp("int64")]},
                     {"use_customized_samples": bool(use_customized_samples), "uniq": True,
                      "remove_accidental_hits": bool(remove_accidental_hits),
                      "num_samples": int(num_samples), "seed": int(seed)})
    soft_label = tmp(logits.dtype)
    helper.append_op("one_hot", {"X": [sampled_label]}, {"Out": [soft_label]},
                     {"depth": int(num_samples) + 1})
    loss = helper.create_variable_for_type_inference(logits.dtype)
    softmax = tmp(logits.dtype)
    helper.append_op("softmax_with_cross_entropy",
                     {"Logits": [sampled_logits], "Label": [soft_label]},
                     {"Softmax": [softmax], "Loss": [loss]},
                     {"soft_label": True, "ignore_index": -100, "numeric_stable_mode": False})
    return loss / num_true
