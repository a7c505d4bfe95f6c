"""fluid.contrib.layers' tree and recommendation layers: tree_conv, tdm_child, tdm_sampler and
rank_attention, with fluid 1.8.5's arguments and parameters (ops in spmd/ops/contrib_tree.py).

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     nodes = fluid.data("nodes", [None, 10, 5], "float32")
...     edges = fluid.data("edges", [None, 10, 2], "int32")
...     out = tree_conv(nodes, edges, output_size=6, num_filters=1, max_depth=2)
>>> out.shape
(-1, 10, 6, 1)
"""
from __future__ import annotations

from ....core.variable import Variable
from ....errors import InvalidArgumentError
from ....layers import tensor as manip
from ....layers.helper import LayerHelper
from ....layers.initializer import ConstantInitializer

__all__ = ["rank_attention", "tdm_child", "tdm_sampler", "tree_conv"]

_CODES = {"int32": 2, "int64": 3}


def _int_dtype(dtype, what: str, where: str) -> str:
    name = str(dtype).replace("paddle.", "")
    if name not in _CODES:
        raise TypeError(f"The data type of '{what}' in {where} must be int32 or int64, but "
                        f"received {dtype}.")
    return name


def _variable(value, arg: str, where: str) -> Variable:
    if not isinstance(value, Variable):
        raise TypeError(f"The type of '{arg}' in {where} must be Variable, but received "
                        f"{type(value).__name__}.")
    return value


def tree_conv(nodes_vector, edge_set, output_size, num_filters=1, max_depth=2, act="tanh",
              param_attr=None, bias_attr=None, name=None):
    """Tree-based convolution (TBCNN): each node's patch (itself and its descendants less
    than max_depth below) weighted by position, times a [feature, 3, output_size,
    num_filters] filter; [batch, max nodes, output_size, num_filters], then bias and act."""
    where = "tree_conv"
    _variable(nodes_vector, "nodes_vector", where)
    _variable(edge_set, "edge_set", where)
    helper = LayerHelper(where, act=act, param_attr=param_attr, bias_attr=bias_attr,
                         name=name)
    dtype = nodes_vector.dtype
    w = helper.create_parameter(helper.param_attr,
                                [nodes_vector.shape[2], 3, output_size, num_filters], dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(where, {"NodesVector": [nodes_vector], "EdgeSet": [edge_set],
                             "Filter": [w]}, {"Out": [out]}, {"max_depth": max_depth})
    return helper.append_activation(helper.append_bias_op(out))


def tdm_child(x, node_nums, child_nums, param_attr=None, dtype="int32"):
    """The children of each node id of `x` on the tree a [node_nums, 3 + child_nums] TreeInfo
    parameter describes (rows: item id, layer, parent, child ids), and whether each child is
    an item (a leaf): (child, leaf_mask), shaped x.shape + [child_nums]."""
    where = "fluid.contrib.layers.tdm_child"
    dtype = _int_dtype(dtype, "dtype", where)
    helper = LayerHelper("tdm_child", param_attr=param_attr)
    info = helper.create_parameter(helper.param_attr, [node_nums, 3 + child_nums], dtype,
                                   default_initializer=ConstantInitializer(0))
    info.stop_gradient = True
    child = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    mask = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("tdm_child", {"X": [x], "TreeInfo": [info]},
                     {"Child": [child], "LeafMask": [mask]},
                     {"child_nums": child_nums, "dtype": _CODES[dtype]})
    return child, mask


def tdm_sampler(x, neg_samples_num_list, layer_node_num_list, leaf_node_num,
                tree_travel_attr=None, tree_layer_attr=None, output_positive=True,
                output_list=True, seed=0, tree_dtype="int32", dtype="int32"):
    """Layer-wise negative sampling of a TDM tree: for each leaf id of `x`, per layer its
    ancestor (Travel, [leaf_node_num, layers]) and neg_samples_num_list[l] distinct other
    nodes of that layer (Layer, [nodes, 1]): (samples, labels, mask), [N, width] or, with
    output_list, one [N, per layer, 1] each per layer."""
    where = "fluid.contrib.layers.tdm_sampler"
    tree_dtype = _int_dtype(tree_dtype, "tree_dtype", where)
    dtype = _int_dtype(dtype, "dtype", where)
    if len(neg_samples_num_list) != len(layer_node_num_list):
        raise ValueError(
            f"The shape of negative samples list must match the shape of layers. But received "
            f"len of neg_samples_num_list: {len(neg_samples_num_list)},and len of "
            f"layer_node_num_list: {len(layer_node_num_list)}, please check your input.")
    if leaf_node_num is None:
        raise InvalidArgumentError(f"{where}: leaf_node_num should not be None here.")
    offsets, total = [0], 0
    for i, (neg, count) in enumerate(zip(neg_samples_num_list, layer_node_num_list)):
        total += count
        offsets.append(total)
        if neg >= count:
            raise ValueError(
                f"The number of negative samples must be less than the number of nodes in the "
                f"layer {i}, But received negative nums {neg}, and num of node at layer {i} "
                f"is {count}, please check your input.")
    if leaf_node_num >= total:
        raise InvalidArgumentError(f"{where}: leaf_node_num must be less than total node "
                                   f"nums ({leaf_node_num} >= {total}).")
    helper = LayerHelper("tdm_sampler")
    travel = helper.create_parameter(tree_travel_attr,
                                     [leaf_node_num, len(layer_node_num_list)], tree_dtype,
                                     default_initializer=ConstantInitializer(0))
    layer = helper.create_parameter(tree_layer_attr, [total, 1], tree_dtype,
                                    default_initializer=ConstantInitializer(0))
    travel.stop_gradient = layer.stop_gradient = True
    out, labels, mask = (helper.create_variable_for_type_inference(dtype, stop_gradient=True)
                         for _ in range(3))
    helper.append_op("tdm_sampler", {"X": [x], "Travel": [travel], "Layer": [layer]},
                     {"Out": [out], "Labels": [labels], "Mask": [mask]},
                     {"neg_samples_num_list": list(neg_samples_num_list),
                      "output_positive": bool(output_positive), "layer_offset_lod": offsets,
                      "seed": seed, "dtype": _CODES[dtype]})
    if not output_list:
        return out, labels, mask
    per_layer: tuple[list, list, list] = ([], [], [])
    start = 0
    for neg in neg_samples_num_list:
        width = neg + int(bool(output_positive))
        for result, whole in zip(per_layer, (out, labels, mask)):
            part = manip.slice(whole, axes=[1], starts=[start], ends=[start + width])
            part = manip.reshape(part, [-1, width, 1])
            part.stop_gradient = True
            result.append(part)
        start += width
    return per_layer


def rank_attention(input, rank_offset, rank_param_shape, rank_param_attr, max_rank=3):
    """PaddleRec's rank attention: each instance's output is the sum, over the slots of its
    rank_offset row, of the slot instance's input times the RankParam block of the pair
    (own rank, slot rank). rank_param_shape = [D * max_rank * max_rank, out]."""
    if input.shape[1] * max_rank * max_rank != rank_param_shape[0]:
        raise InvalidArgumentError(
            f"rank_attention: rank_param_shape[0] must be input width * max_rank * max_rank = "
            f"{input.shape[1] * max_rank * max_rank}, got {rank_param_shape[0]}")
    helper = LayerHelper("rank_attention")
    param = helper.create_parameter(rank_param_attr, list(rank_param_shape), input.dtype)
    param.stop_gradient = False
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("rank_attention", {"X": [input], "RankOffset": [rank_offset],
                                        "RankParam": [param]}, {"Out": [out]},
                     {"MaxRank": max_rank})
    return out
