"""fluid.contrib.layers.nn: fluid 1.8's contributed layers. Those that are compositions of
spmd's layers are here (fused_elemwise_activation, fused_embedding_seq_pool, partial_concat,
partial_sum, shuffle_batch), with fluid 1.8.5's semantics and gradients through the composed
ops; the ones with their own C++ kernels in fluid are spmd ops too: search.py
(match_matrix_tensor, sequence_topk_avg_pooling, var_conv_2d, search_pyramid_hash), tree.py
(tree_conv, tdm_child, tdm_sampler, rank_attention) and multiclass_nms2 here.

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.data("x", [None, 3], "float32")
...     y = fluid.data("y", [None, 3], "float32")
...     out = fused_elemwise_activation(x, y, ["elementwise_add", "relu"])   # x + relu(y)
>>> out.shape
(-1, 3)
"""
from __future__ import annotations

import warnings

from .... import layers as L
from ....core import unique_name
from ....core.variable import Variable
from ....errors import InvalidArgumentError
from ....layers.helper import LayerHelper
from ....layers.param_attr import ParamAttr
from ..._pending import missing_names
from . import search, tree
from .search import *  # noqa: F403 - fluid.contrib.layers.nn holds these layers too
from .tree import *  # noqa: F403

__all__ = ["fused_elemwise_activation", "fused_embedding_seq_pool", "multiclass_nms2",
           "partial_concat", "partial_sum", "shuffle_batch", *search.__all__, *tree.__all__]

_BINARY = {"elementwise_add": lambda a, b, axis: L.elementwise_add(a, b, axis=axis),
           "elementwise_mul": lambda a, b, axis: L.elementwise_mul(a, b, axis=axis)}


def _unary(name: str, scale: float):
    table = {"relu": L.relu, "sigmoid": L.sigmoid, "tanh": L.tanh, "gelu": L.gelu,
             "scale": lambda v: L.scale(v, scale=scale)}
    if name not in table:
        raise InvalidArgumentError(f"fused_elemwise_activation: unary functor {name!r} is not "
                                   f"one of {sorted(table)}")
    return table[name]


def fused_elemwise_activation(x, y, functor_list, axis=-1, scale=0.0,
                              save_intermediate_out=True):
    """[binary, unary]: binary(x, unary(y)); [unary, binary]: unary(binary(x, y)). Binary:
    elementwise_add / elementwise_mul (with `axis`); unary: relu, sigmoid, tanh, gelu, scale
    (by `scale`)."""
    if isinstance(functor_list, str):
        functor_list = functor_list.split(",")
    if not isinstance(functor_list, list) or len(functor_list) != 2:
        raise ValueError("functor_list should be a list of str, and the length should be 2.")
    first, second = functor_list
    if first in _BINARY:
        return _BINARY[first](x, _unary(second, scale)(y), axis)
    if second in _BINARY:
        return _unary(first, scale)(_BINARY[second](x, y, axis))
    raise InvalidArgumentError(f"fused_elemwise_activation: one of {functor_list} must be "
                               f"elementwise_add or elementwise_mul")


def fused_embedding_seq_pool(input, size, is_sparse=False, padding_idx=None, combiner="sum",
                             param_attr=None, dtype="float32"):
    """The sum over each sequence of `input`'s (LoD ids) embeddings: [sequences, size[1]]."""
    if combiner != "sum":
        raise InvalidArgumentError(f"fused_embedding_seq_pool: combiner must be 'sum' (the "
                                   f"only one fluid 1.8 has), got {combiner!r}")
    attr = ParamAttr._to_attr(param_attr)
    if attr.name is None:
        attr.name = unique_name.generate("fused_embedding_seq_pool.w")
    emb = L.embedding(input, size, is_sparse=is_sparse, padding_idx=padding_idx,
                      param_attr=attr, dtype=dtype)
    return L.sequence_pool(emb, "sum")


def _checked_list(input, where: str) -> list:
    if not isinstance(input, list):
        warnings.warn(f"The type of input in {where} should be list, but received "
                      f"{type(input)}.", stacklevel=3)
        input = [input]
    for i, x in enumerate(input):
        if not isinstance(x, Variable) or len(x.shape) != 2:
            raise InvalidArgumentError(f"{where}: input[{i}] must be a 2-D Variable")
    return input


def _columns(x, start_index: int, length: int):
    end = x.shape[1] if length < 0 else start_index + length
    return L.slice(x, axes=[1], starts=[start_index], ends=[end])


def partial_concat(input, start_index=0, length=-1):
    """Columns [start_index, start_index + length) of each input (to the end for length -1),
    concatenated along the columns."""
    input = _checked_list(input, "partial_concat")
    return L.concat([_columns(x, start_index, length) for x in input], axis=1)


def partial_sum(input, start_index=0, length=-1):
    """The sum of columns [start_index, start_index + length) of each input."""
    input = _checked_list(input, "partial_sum")
    return L.sums([_columns(x, start_index, length) for x in input])


def shuffle_batch(x, seed=None):
    """`x` with its rows (all dims but the last, flattened) in a random order, drawn anew
    each run from the program's random stream (Program.random_seed fixes the sequence of
    orders; fluid's `seed` starts its own sequence, which spmd's stream stands for)."""
    rows = L.reshape(x, [-1, x.shape[-1]])
    keys = L.uniform_random_batch_size_like(rows, [-1, 1], min=0.0, max=1.0, seed=0)
    _, order = L.argsort(L.reshape(keys, [-1]))
    return L.reshape(L.gather(rows, order), list(x.shape))


def multiclass_nms2(bboxes, scores, score_threshold, nms_top_k, keep_top_k, nms_threshold=0.3,
                    normalized=True, nms_eta=1.0, background_label=0, return_index=False,
                    name=None):
    """fluid.layers.multiclass_nms that also gives each kept box's index among the batch's
    boxes (return_index): (out, index), both LoD and without gradient, as fluid 1.8's
    contrib op (the multiclass_nms2 op of spmd/ops/detection_ssd.py)."""
    helper = LayerHelper("multiclass_nms2", name=name)
    out = helper.create_variable_for_type_inference(bboxes.dtype, stop_gradient=True)
    index = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("multiclass_nms2", {"BBoxes": [bboxes], "Scores": [scores]},
                     {"Out": [out], "Index": [index]},
                     {"background_label": background_label,
                      "score_threshold": float(score_threshold), "nms_top_k": nms_top_k,
                      "nms_threshold": float(nms_threshold), "nms_eta": float(nms_eta),
                      "keep_top_k": keep_top_k, "normalized": normalized})
    return (out, index) if return_index else out


# fluid 1.8 names spmd does not provide
MISSING: list[str] = []
missing_names(globals(), MISSING)
