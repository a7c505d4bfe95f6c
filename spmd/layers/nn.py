"""fluid.layers neural-network builders: fc, embedding, dropout, softmax, topk, and the
nn.py losses label_smooth, log_loss, smooth_l1, dice_loss.
(conv2d and pool2d are in conv.py, batch_norm and layer_norm in norm.py.)

>>> # hidden = fc(input=x, size=128, act="relu")
"""
from __future__ import annotations

import math
import numbers

from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable

__all__ = ["dice_loss", "dropout", "embedding", "fc", "label_smooth", "log_loss", "smooth_l1",
           "softmax", "topk"]

_FLOATS = {"float16", "float32", "float64"}


def fc(input, size, num_flatten_dims=1, param_attr=None, bias_attr=None, act=None, name=None):
    """Fully connected: act(sum_i flatten(input_i) @ W_i + b).

    Each input is flattened to a matrix at `num_flatten_dims` (-1: all but the last dim); its
    weight has shape [prod(input.shape[num_flatten_dims:]), size], initialized by Xavier unless
    `param_attr` says otherwise; the bias (shape [size], zeros) is left out with
    `bias_attr=False`. A list of inputs gets one weight each, and the products are summed.
    Parameters are named `<name>.w_<i>` and `<name>.b_0`, name defaulting to `fc_<n>`.

    >>> # out = fc(input=x, size=10, act="softmax")       # x [N, 784] -> out [N, 10]
    """
    helper = LayerHelper("fc", input=input, param_attr=param_attr, bias_attr=bias_attr, act=act,
                         name=name)
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size <= 0:
        raise InvalidArgumentError(f"fc: size must be a positive int, got {size!r}")
    dtype = helper.input_dtype("input")
    products = []
    for x, w_attr in helper.iter_inputs_and_params("input"):
        k = x.ndim - 1 if num_flatten_dims == -1 else num_flatten_dims
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k < x.ndim:
            raise InvalidArgumentError(
                f"fc: num_flatten_dims={num_flatten_dims} must be in [1, {x.ndim - 1}] for "
                f"input {x.name} of shape {list(x.shape)}")
        inner = x.shape[k:]
        if any(d < 0 for d in inner):
            raise InvalidArgumentError(
                f"fc: input {x.name} has shape {list(x.shape)}; the dims from "
                f"num_flatten_dims={k} on must be known to size the weight, got {list(inner)}")
        w = helper.create_parameter(w_attr, [math.prod(inner), int(size)], dtype)
        out = helper.create_variable_for_type_inference(dtype)
        helper.append_op("mul", {"X": [x], "Y": [w]}, {"Out": [out]},
                         {"x_num_col_dims": k, "y_num_col_dims": 1})
        products.append(out)
    if len(products) == 1:
        pre_bias = products[0]
    else:
        pre_bias = helper.create_variable_for_type_inference(dtype)
        helper.append_op("sum", {"X": products}, {"Out": [pre_bias]})
    pre_act = helper.append_bias_op(pre_bias, dim_start=k)
    return helper.append_activation(pre_act)


def embedding(input, size, is_sparse=False, is_distributed=False, padding_idx=None,
              param_attr=None, dtype="float32"):
    """Rows of a [vocab, dim] table picked by int64 ids of shape [..., 1] (lookup_table);
    output [..., dim]. `padding_idx` (negative counts from the end) gives zero rows that get
    no gradient; one outside [-vocab, vocab) pads nothing (fluid 1.8 accepts it too). The
    table is named `embedding_<n>.w_0`, Xavier-initialized by default.

    >>> # emb = embedding(input=ids, size=[10000, 64])     # ids [N, 1] -> emb [N, 64]
    """
    return embedding_op("lookup_table", input, size, is_sparse, is_distributed, padding_idx,
                        param_attr, dtype)


def embedding_op(op_type, input, size, is_sparse, is_distributed, padding_idx, param_attr,
                 dtype):
    """The embedding layer over `op_type`: lookup_table (ids [..., 1]) or lookup_table_v2
    (ids of any shape, paddle 2.x)."""
    helper = LayerHelper("embedding", param_attr=param_attr)
    check_variable(input, "input", "embedding", dtypes={"int32", "int64"})
    if (not isinstance(size, (list, tuple)) or len(size) != 2
            or not all(isinstance(s, numbers.Integral) and s > 0 for s in size)):
        raise InvalidArgumentError(
            f"embedding: size must be [vocab_size, embedding_dim] of positive ints, got {size!r}")
    vocab = int(size[0])
    if op_type == "lookup_table" and (input.ndim < 2 or input.shape[-1] != 1):
        raise InvalidArgumentError(
            f"embedding: ids must have a trailing dim of 1 ([..., 1]), got {input.name} "
            f"{list(input.shape)}; paddle.static.nn.embedding takes ids without it")
    if padding_idx is None:
        padding_idx = -1
    elif not -vocab <= padding_idx < vocab:
        # fluid 1.8 accepts it: no id in [0, vocab) can equal it, so no row is padding
        padding_idx = -1
    elif padding_idx < 0:
        padding_idx += vocab
    w = helper.create_parameter(helper.param_attr, [vocab, int(size[1])], dtype)
    out = helper.create_variable_for_type_inference(w.dtype)
    helper.append_op(op_type, {"W": [w], "Ids": [input]}, {"Out": [out]},
                     {"padding_idx": padding_idx},
                     compat_attrs={"is_sparse": bool(is_sparse),
                                   "is_distributed": bool(is_distributed),
                                   "remote_prefetch": False})
    return out


def dropout(x, dropout_prob, is_test=False, seed=None, name=None,
            dropout_implementation="downgrade_in_infer"):
    """Zero each element with probability `dropout_prob` while training.

    "downgrade_in_infer" (fluid's default): train x*mask, test x*(1-p);
    "upscale_in_train": train x*mask/(1-p), test x. A non-zero `seed` fixes the mask: the same
    elements are dropped at every step. Without one, each step draws a fresh mask from the
    program's generator, which the program's `random_seed` makes reproducible (fluid 1.8 also
    fixed the mask whenever `random_seed` was set; spmd does not, on purpose).

    >>> # h = dropout(h, dropout_prob=0.5, dropout_implementation="upscale_in_train")
    """
    helper = LayerHelper("dropout", name=name)
    check_variable(x, "x", "dropout", dtypes=_FLOATS)
    if isinstance(dropout_prob, bool) or not isinstance(dropout_prob, numbers.Real) or not (
            0.0 <= dropout_prob <= 1.0):
        raise InvalidArgumentError(f"dropout: dropout_prob must be in [0, 1], got {dropout_prob!r}")
    if dropout_implementation not in ("downgrade_in_infer", "upscale_in_train"):
        raise InvalidArgumentError(
            f"dropout: dropout_implementation must be 'downgrade_in_infer' or "
            f"'upscale_in_train', got {dropout_implementation!r}")
    out = helper.create_variable_for_type_inference(x.dtype)
    mask = helper.create_variable_for_type_inference("uint8", stop_gradient=True)
    helper.append_op("dropout", {"X": [x]}, {"Out": [out], "Mask": [mask]},
                     {"dropout_prob": float(dropout_prob), "is_test": bool(is_test),
                      "fix_seed": bool(seed), "seed": int(seed) if seed else 0,
                      "dropout_implementation": dropout_implementation})
    return out


def softmax(input, use_cudnn=False, name=None, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`."""
    helper = LayerHelper("softmax", name=name)
    check_variable(input, "input", "softmax", dtypes=_FLOATS)
    if not -max(input.ndim, 1) <= axis < max(input.ndim, 1):
        raise InvalidArgumentError(
            f"softmax: axis={axis} is out of range for {input.name} of rank {input.ndim}")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("softmax", {"X": [input]}, {"Out": [out]}, {"axis": axis},
                     compat_attrs={"use_cudnn": bool(use_cudnn)})
    return out


def topk(input, k, name=None):
    """The k largest values along the last dim and their int64 indices: (values, indices).
    Equal values come in the order of fluid 1.8's CPU kernel (its partial sort's), not
    necessarily by index.
    The values pass gradients back to `input` (to the picked elements); fluid 1.8's static
    graph makes no gradient for top_k at all, so there `input` gets none."""
    helper = LayerHelper("top_k", name=name)
    check_variable(input, "input", "topk")
    inputs = {"X": [input]}
    if isinstance(k, Variable):
        # k at run time: the last dim of the outputs is unknown until then (fluid 1.8
        # declares it as 1, whatever k holds)
        check_variable(k, "k", "topk", dtypes={"int32", "int64"})
        k.stop_gradient = True
        inputs["K"], k = [k], 1
    elif isinstance(k, bool) or not isinstance(k, numbers.Integral) or k <= 0:
        raise InvalidArgumentError(
            f"topk: k must be a positive int or a [1] int Variable, got {k!r}")
    last = input.shape[-1] if input.ndim else 1
    if last >= 0 and k > last:
        raise InvalidArgumentError(
            f"topk: k={k} exceeds the last dim ({last}) of {input.name} {list(input.shape)}")
    values = helper.create_variable_for_type_inference(input.dtype)
    indices = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("top_k", inputs, {"Out": [values], "Indices": [indices]},
                     {"k": int(k)})
    return values, indices


def label_smooth(label, prior_dist=None, epsilon=0.1, dtype="float32", name=None):
    """(1 - epsilon) * label + epsilon * prior_dist (uniform 1/K when prior_dist is None) for
    one-hot labels [N, K]; the label gets no gradient (stop_gradient is set, as in fluid).

    >>> # smooth = label_smooth(label=one_hot(y, depth=10), epsilon=0.1)
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not (
            0.0 <= epsilon <= 1.0):
        raise InvalidArgumentError(f"label_smooth: epsilon must be in [0, 1], got {epsilon!r}")
    check_variable(label, "label", "label_smooth", dtypes={"float32", "float64"})
    helper = LayerHelper("label_smooth", name=name)
    label.stop_gradient = True
    out = helper.create_variable_for_type_inference(dtype)
    inputs = {"X": [label]}
    if prior_dist is not None:
        inputs["PriorDist"] = [check_variable(prior_dist, "prior_dist", "label_smooth")]
    helper.append_op("label_smooth", inputs, {"Out": [out]}, {"epsilon": float(epsilon)})
    return out


def log_loss(input, label, epsilon=1e-4, name=None):
    """-label * log(input + epsilon) - (1 - label) * log(1 - input + epsilon) for predicted
    probabilities input [N, 1] (float32) and labels [N, 1].

    >>> # loss = log_loss(input=sigmoid(logit), label=y)
    """
    check_variable(input, "input", "log_loss", dtypes={"float32"})
    check_variable(label, "label", "log_loss", dtypes={"float32"})
    helper = LayerHelper("log_loss", name=name)
    loss = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("log_loss", {"Predicted": [input], "Labels": [label]}, {"Loss": [loss]},
                     {"epsilon": float(epsilon)})
    return loss


def smooth_l1(x, y, inside_weight=None, outside_weight=None, sigma=None):
    """Smooth L1 summed per sample: [N, 1]. With d = inside_weight * (x - y) and s = sigma^2
    (sigma defaults to 1.0): 0.5 * s * d^2 where |d| < 1/s, |d| - 0.5/s elsewhere, times
    outside_weight. As in fluid, give both weights or neither.

    >>> # loss = smooth_l1(x=pred_box, y=gt_box, sigma=3.0)
    """
    check_variable(x, "X", "smooth_l1_loss", dtypes={"float32", "float64"})
    check_variable(y, "Y", "smooth_l1_loss", dtypes={"float32", "float64"})
    helper = LayerHelper("smooth_l1_loss")
    diff = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    loss = helper.create_variable_for_type_inference(x.dtype)
    inputs = {"X": [x], "Y": [y]}
    for slot, w in (("InsideWeight", inside_weight), ("OutsideWeight", outside_weight)):
        if w is not None:
            inputs[slot] = [check_variable(w, slot, "smooth_l1_loss")]
    helper.append_op("smooth_l1_loss", inputs, {"Diff": [diff], "Out": [loss]},
                     {"sigma": float(sigma) if sigma is not None else 1.0})
    return loss


def dice_loss(input, label, epsilon=0.00001, name=None):
    """Mean over the batch of 1 - 2 |input * onehot(label)| / (|input| + |onehot(label)| +
    epsilon), sums over all but the batch dim; input [N, ..., C] probabilities, label
    [N, ..., 1] int64 class ids. Shape [1].

    >>> # loss = dice_loss(input=softmax(seg_logits), label=seg_labels)
    """
    from .math_ops import reduce_mean, reduce_sum
    from .tensor import one_hot

    check_variable(input, "input", "dice_loss", dtypes=_FLOATS)
    label = one_hot(label, depth=input.shape[-1])
    dims = list(range(1, len(input.shape)))
    inse = reduce_sum(input * label, dim=dims)
    denominator = reduce_sum(input, dim=dims) + reduce_sum(label, dim=dims)
    return reduce_mean(1 - inse * 2 / (denominator + epsilon))
