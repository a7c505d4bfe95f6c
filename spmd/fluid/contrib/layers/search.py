"""fluid.contrib.layers' text-matching layers of the search models: match_matrix_tensor,
sequence_topk_avg_pooling and var_conv_2d, with fluid 1.8.5's arguments, parameters and
outputs (ops in spmd/ops/contrib_search.py).

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.data("x", [None, 4], "float32", lod_level=1)
...     y = fluid.data("y", [None, 4], "float32", lod_level=1)
...     out, tmp = match_matrix_tensor(x, y, channel_num=3)   # [sum of 3 * len_x * len_y, 1]
>>> out.shape
(-1, 1)
"""
from __future__ import annotations

from ....core.variable import Variable
from ....errors import InvalidArgumentError
from ....layers.helper import LayerHelper

__all__ = ["match_matrix_tensor", "search_pyramid_hash", "sequence_topk_avg_pooling",
           "var_conv_2d"]


def _pair(value, what: str, where: str) -> list[int]:
    values = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(values) != 2 or not all(isinstance(v, int) for v in values):
        raise InvalidArgumentError(f"{where}: {what} must be an int or a pair of ints, got "
                                   f"{value!r}")
    return values


def _variable(value, arg: str, where: str) -> Variable:
    if not isinstance(value, Variable):
        raise InvalidArgumentError(f"{where}: {arg} must be a Variable, got "
                                   f"{type(value).__name__}")
    return value


def match_matrix_tensor(x, y, channel_num, act=None, param_attr=None, dtype="float32",
                        name=None):
    """The matching matrices X_b W[:, t, :] Y_b^T of each pair of sequences (x's sequence b
    against y's), for t < channel_num: (out [sum of channel_num * len_x * len_y, 1] with one
    LoD level, tmp = x W flattened)."""
    where = "match_matrix_tensor"
    _variable(x, "x", where)
    _variable(y, "y", where)
    if len(x.shape) != 2 or len(y.shape) != 2 or x.shape[-1] != y.shape[-1]:
        raise InvalidArgumentError(f"{where}: x and y must be 2-D with one width, got "
                                   f"{list(x.shape)} and {list(y.shape)}")
    helper = LayerHelper(where, act=act, param_attr=param_attr, name=name)
    w = helper.create_parameter(helper.param_attr, [x.shape[-1], channel_num, y.shape[-1]],
                                dtype)
    out = helper.create_variable_for_type_inference(dtype)
    tmp = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op(where, {"X": [x], "Y": [y], "W": [w]}, {"Out": [out], "Tmp": [tmp]},
                     {"dim_t": channel_num})
    return helper.append_activation(out), tmp


def sequence_topk_avg_pooling(input, row, col, topks, channel_num):
    """For every row of each sequence's [channel_num, rows, cols] map (rows and cols from
    row's and col's LoD): the means of its k largest values, for each k of topks (zeros
    stand in past a short row). [sum of rows, channel_num * len(topks)], row's LoD."""
    where = "sequence_topk_avg_pooling"
    for arg, value in (("input", input), ("row", row), ("col", col)):
        _variable(value, arg, where)
    helper = LayerHelper(where)
    out = helper.create_variable_for_type_inference(input.dtype)
    pos = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op(where, {"X": [input], "ROW": [row], "COLUMN": [col]},
                     {"Out": [out], "pos": [pos]},
                     {"topks": list(topks), "channel_num": channel_num})
    return out


def var_conv_2d(input, row, col, input_channel, output_channel, filter_size, stride=1,
                param_attr=None, act=None, dtype="float32", name=None):
    """A 'same'-padded, strided 2-D convolution of each sequence's [input_channel, rows,
    cols] map (rows and cols from row's and col's LoD); out holds each sequence's
    [output_channel, out rows, out cols] map flattened ([total, 1], one LoD level)."""
    where = "var_conv_2d"
    for arg, value in (("input", input), ("row", row), ("col", col)):
        _variable(value, arg, where)
    if len(input.shape) != 2:
        raise InvalidArgumentError(f"{where}: input must be 2-D [total, 1], got "
                                   f"{list(input.shape)}")
    kh, kw = _pair(filter_size, "filter_size", where)
    sh, sw = _pair(stride, "stride", where)
    helper = LayerHelper(where, act=act, param_attr=param_attr, name=name)
    w = helper.create_parameter(helper.param_attr,
                                [int(output_channel), int(input_channel) * kh * kw], dtype)
    out = helper.create_variable_for_type_inference(dtype)
    col_out = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op(where, {"X": [input], "ROW": [row], "COLUMN": [col], "W": [w]},
                     {"Out": [out], "Col": [col_out]},
                     {"InputChannel": input_channel, "OutputChannel": output_channel,
                      "StrideH": sh, "StrideW": sw, "KernelH": kh, "KernelW": kw})
    return helper.append_activation(out)


def search_pyramid_hash(input, num_emb, space_len, pyramid_layer, rand_len, drop_out_percent,
                        is_training, use_filter, white_list_len, black_list_len, seed, lr,
                        param_attr=None, param_attr_wl=None, param_attr_bl=None, name=None,
                        distribute_update_vars=None, dtype="float32"):
    """Pyramid hash embedding: one row per n-gram (2 <= n <= pyramid_layer) of each sequence
    of int32 ids, its num_emb values gathered from a [space_len + rand_len, 1] table in
    chunks of rand_len at XXH32 hashes of the n-gram; training drops n-grams with probability
    drop_out_percent, inference scales by it (as fluid 1.8.5). The table is frozen
    (stop_gradient), as in fluid. use_filter with white / black lists (fluid's bloom
    filters) is refused at run time; use_filter=False runs."""
    where = "search_pyramid_hash"
    _variable(input, "input", where)
    helper = LayerHelper(where, param_attr=param_attr, name=name)
    w = helper.create_parameter(helper.param_attr, [space_len + rand_len, 1], dtype)
    w.stop_gradient = True
    inputs = {"X": [input], "W": [w]}
    for slot, length, attr in (("WhiteList", white_list_len, param_attr_wl),
                               ("BlackList", black_list_len, param_attr_bl)):
        if length > 0:
            lst = helper.create_parameter(attr, [length, 1], dtype)
            lst.stop_gradient = True
            inputs[slot] = [lst]
    update_vars = ""
    if distribute_update_vars:
        if not isinstance(distribute_update_vars, list):
            raise InvalidArgumentError(f"{where}: distribute_update_vars must be a list of "
                                       f"parameter names, got {distribute_update_vars!r}")
        known = [getattr(a, "name", None) for a in (param_attr, param_attr_wl, param_attr_bl)
                 if a]
        for param in distribute_update_vars:
            if param not in known:
                raise ValueError(f"Pyramid Hash layer didn't have parameter {param}")
        update_vars = ",".join(distribute_update_vars)
    out = helper.create_variable_for_type_inference(dtype)
    drop_pos = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    x_temp = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("pyramid_hash", inputs,
                     {"Out": [out], "DropPos": [drop_pos], "X_Temp_Out": [x_temp]},
                     {"num_emb": num_emb, "space_len": space_len, "pyramid_layer": pyramid_layer,
                      "rand_len": rand_len, "drop_out_percent": float(drop_out_percent),
                      "is_training": int(is_training), "use_filter": bool(use_filter),
                      "white_list_len": white_list_len, "black_list_len": black_list_len,
                      "seed": seed, "lr": float(lr), "distribute_update_vars": update_vars})
    return out
