"""fluid.layers builders for the recurrent units that need no LoD: gru_unit, lstm_unit and lstm
(fluid 1.8's cuDNN LSTM, the cudnn_lstm op, which runs on CPU here too).

Parameters are named and shaped as fluid 1.8 makes them, so fluid programs' checkpoints load:
gru_unit `gru_unit_<n>.w_0` [D, 3D] and `gru_unit_<n>.b_0` [1, 3D]; lstm_unit an fc layer
(`fc_<n>.w_0` [M + D, 4D], `fc_<n>.b_0` [4D]) over concat(x_t, hidden_t_prev); lstm one flat
`cudnn_lstm_<n>.w_0` in cuDNN's layout (spmd.ops.rnn.cudnn_lstm_weight_size).

>>> # h, reset_h, gate = fluid.layers.gru_unit(fluid.layers.fc(x, 3 * 16), h_prev, size=48)
"""
from __future__ import annotations

import numbers
import warnings

from ..errors import InvalidArgumentError
from ..ops.rnn import GRU_ACTIVATIONS, cudnn_lstm_weight_size
from .helper import LayerHelper, check_variable
from .nn import fc
from .param_attr import ParamAttr
from .tensor import concat

__all__ = ["gru_unit", "lstm", "lstm_unit"]

_FLOATS = {"float32", "float64"}


def _positive_int(value, arg: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise InvalidArgumentError(f"{where}: {arg} must be a positive int, got {value!r}")
    return int(value)


def _rank(var, rank: int, arg: str, where: str, what: str):
    if var.ndim != rank:
        raise InvalidArgumentError(
            f"{where}: {arg} ({var.name}) must be {rank}-D {what}, got shape {list(var.shape)}")


def gru_unit(input, hidden, size, param_attr=None, bias_attr=None, activation="tanh",
             gate_activation="sigmoid", origin_mode=False):
    """One GRU step: `input` is the step input already projected to [N, 3D] (update, reset,
    candidate blocks; fluid leaves that fc to the caller), `hidden` the previous state [N, D],
    `size` = 3 * D. Returns (hidden [N, D], reset_hidden_prev [N, D], gate [N, 3D]).

    origin_mode=False: h = u * c + (1 - u) * h_prev; True: h = u * h_prev + (1 - u) * c.
    As in fluid 1.8 (every version of its builder), the op always applies tanh to the
    candidate and sigmoid to the gates, whatever `activation` / `gate_activation` say; spmd
    keeps those numbers and warns when they differ from the defaults.

    >>> # x = fluid.layers.fc(emb, size=3 * 32)
    >>> # h, _, _ = fluid.layers.gru_unit(x, h_prev, size=3 * 32)
    """
    where = "gru_unit"
    check_variable(input, "input", where, dtypes=_FLOATS)
    check_variable(hidden, "hidden", where, dtypes=_FLOATS)
    size = _positive_int(size, "size", where)
    if size % 3:
        raise InvalidArgumentError(
            f"{where}: size={size} must be 3 * the hidden size (fluid's convention: "
            f"gru_unit(size=hidden_dim * 3)); hidden is {list(hidden.shape)}")
    for arg, value in (("activation", activation), ("gate_activation", gate_activation)):
        if value not in GRU_ACTIVATIONS:
            raise InvalidArgumentError(
                f"{where}: {arg}={value!r} is not one of {list(GRU_ACTIVATIONS)}")
    if (activation, gate_activation) != ("tanh", "sigmoid"):
        warnings.warn(
            f"{where}: activation={activation!r}, gate_activation={gate_activation!r} are "
            f"ignored, as fluid 1.8's gru_unit ignores them: the op applies tanh and sigmoid. "
            f"For other activations append the gru_unit op with their codes "
            f"{dict((n, i) for i, n in enumerate(GRU_ACTIVATIONS))}", stacklevel=2)
    helper = LayerHelper("gru_unit", input=input, hidden=hidden, param_attr=param_attr,
                         bias_attr=bias_attr)
    dtype = helper.input_dtype("input")
    d = size // 3
    weight = helper.create_parameter(helper.param_attr, [d, 3 * d], dtype)
    gate = helper.create_variable_for_type_inference(dtype)
    reset_hidden_pre = helper.create_variable_for_type_inference(dtype)
    updated_hidden = helper.create_variable_for_type_inference(dtype)
    inputs = {"Input": [input], "HiddenPrev": [hidden], "Weight": [weight]}
    if helper.bias_attr:
        inputs["Bias"] = [helper.create_parameter(helper.bias_attr, [1, 3 * d], dtype,
                                                  is_bias=True)]
    helper.append_op("gru_unit", inputs,
                     {"Gate": [gate], "ResetHiddenPrev": [reset_hidden_pre],
                      "Hidden": [updated_hidden]},
                     {"activation": GRU_ACTIVATIONS.index("tanh"),
                      "gate_activation": GRU_ACTIVATIONS.index("sigmoid"),
                      "origin_mode": bool(origin_mode)})
    return updated_hidden, reset_hidden_pre, gate


def lstm_unit(x_t, hidden_t_prev, cell_t_prev, forget_bias=0.0, param_attr=None,
              bias_attr=None, name=None):
    """One LSTM step: gates = fc(concat([x_t, hidden_t_prev], axis=1), 4D) in the order
    i, f, o, g; c = sigmoid(f + forget_bias) * cell_t_prev + sigmoid(i) * tanh(g),
    h = sigmoid(o) * tanh(c). Returns (h, c), each [N, D].

    >>> # h, c = fluid.layers.lstm_unit(x_t, h_prev, c_prev, forget_bias=1.0)
    """
    where = "lstm_unit"
    helper = LayerHelper("lstm_unit", name=name)
    for arg, v in (("x_t", x_t), ("hidden_t_prev", hidden_t_prev),
                   ("cell_t_prev", cell_t_prev)):
        check_variable(v, arg, where, dtypes=_FLOATS)
        _rank(v, 2, arg, where, "[batch, features]")
    batches = {v.shape[0] for v in (x_t, hidden_t_prev, cell_t_prev)}
    if len(batches) != 1:
        raise InvalidArgumentError(
            f"{where}: x_t {list(x_t.shape)}, hidden_t_prev {list(hidden_t_prev.shape)} and "
            f"cell_t_prev {list(cell_t_prev.shape)} must have the same first (batch) dim")
    if hidden_t_prev.shape[1] != cell_t_prev.shape[1]:
        raise InvalidArgumentError(
            f"{where}: hidden_t_prev {list(hidden_t_prev.shape)} and cell_t_prev "
            f"{list(cell_t_prev.shape)} must have the same hidden size (second dim)")
    if not isinstance(forget_bias, numbers.Real) or isinstance(forget_bias, bool):
        raise InvalidArgumentError(f"{where}: forget_bias must be a number, got "
                                   f"{forget_bias!r}")
    if bias_attr is None:
        bias_attr = ParamAttr()
    size = cell_t_prev.shape[1]
    fc_out = fc(concat([x_t, hidden_t_prev], axis=1), size=4 * size, param_attr=param_attr,
                bias_attr=bias_attr)
    dtype = x_t.dtype
    c = helper.create_variable_for_type_inference(dtype)
    h = helper.create_variable_for_type_inference(dtype)
    helper.append_op("lstm_unit", {"X": [fc_out], "C_prev": [cell_t_prev]},
                     {"C": [c], "H": [h]}, {"forget_bias": float(forget_bias)})
    return h, c


def lstm(input, init_h, init_c, max_len, hidden_size, num_layers, dropout_prob=0.0,
         is_bidirec=False, is_test=False, name=None, default_initializer=None, seed=-1):
    """fluid 1.8's cuDNN LSTM (op cudnn_lstm), on any place: `input` is time-major
    [seq_len, batch, input_size] with seq_len <= max_len; init_h / init_c are
    [num_layers * directions, batch, hidden_size]. Returns (rnn_out [seq_len, batch,
    hidden_size * directions], last_h, last_c). Gates i, f, c, o without peepholes; dropout
    (training only) between layers, never after the last. The one parameter is the flat cuDNN
    weight (Xavier by default, or `default_initializer`).

    fluid 1.8 declares rnn_out's static last dim as hidden_size even when bidirectional (its
    value has 2 * hidden_size); spmd declares 2 * hidden_size.

    >>> # out, h, c = fluid.layers.lstm(x, h0, c0, max_len=20, hidden_size=64, num_layers=2)
    """
    where = "lstm"
    helper = LayerHelper("cudnn_lstm", name=name)
    check_variable(input, "input", where, dtypes=_FLOATS)
    check_variable(init_h, "init_h", where, dtypes=_FLOATS)
    check_variable(init_c, "init_c", where, dtypes=_FLOATS)
    _rank(input, 3, "input", where, "time-major [seq_len, batch, input_size]")
    for arg, value in (("max_len", max_len), ("hidden_size", hidden_size),
                       ("num_layers", num_layers)):
        _positive_int(value, arg, where)
    input_size = input.shape[-1]
    if input_size <= 0:
        raise InvalidArgumentError(
            f"{where}: input {list(input.shape)} must have a known last dim (input_size) to "
            f"size the weight")
    dtype = input.dtype
    size = cudnn_lstm_weight_size(input_size, hidden_size, num_layers, bool(is_bidirec))
    weight = helper.create_parameter(ParamAttr._to_attr(None), [size], dtype,
                                     default_initializer=default_initializer)
    out = helper.create_variable_for_type_inference(dtype)
    last_h = helper.create_variable_for_type_inference(dtype)
    last_c = helper.create_variable_for_type_inference(dtype)
    reserve = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op(
        "cudnn_lstm", {"Input": [input], "InitH": [init_h], "InitC": [init_c], "W": [weight]},
        {"Out": [out], "last_h": [last_h], "last_c": [last_c], "Reserve": [reserve]},
        {"max_len": int(max_len), "is_bidirec": bool(is_bidirec), "input_size": input_size,
         "hidden_size": int(hidden_size), "num_layers": int(num_layers),
         "is_test": bool(is_test), "dropout_prob": float(dropout_prob), "seed": int(seed)})
    return out, last_h, last_c
