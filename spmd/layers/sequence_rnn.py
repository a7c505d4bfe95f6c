"""fluid.layers' recurrent layers over LoD sequences: dynamic_lstm, dynamic_lstmp and
dynamic_gru (fluid 1.8's lstm, lstmp and gru ops; the math is in spmd/ops/sequence_rnn.py).

The input is the step input already projected (fc(size=4 * hidden) for the LSTMs, 3 * hidden
for the GRU); parameters are named and shaped as fluid 1.8 makes them, so its checkpoints load:
dynamic_lstm `lstm_<n>.w_0` [D, 4D] and `lstm_<n>.b_0` [1, 7D] (4D without peepholes);
dynamic_lstmp `lstmp_<n>.w_0` [P, 4D], `lstmp_<n>.w_1` [D, P] and `lstmp_<n>.b_0`; dynamic_gru
`gru_<n>.w_0` [D, 3D] and `gru_<n>.b_0` [1, 3D].

>>> # emb = fluid.embedding(words, [vocab, 32])          # words: lod_level=1
>>> # hidden, cell = fluid.layers.dynamic_lstm(fluid.layers.fc(emb, 4 * 64), size=4 * 64)
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from ..ops.sequence_rnn import RNN_ACTIVATIONS
from .helper import LayerHelper, check_variable

__all__ = ["dynamic_gru", "dynamic_lstm", "dynamic_lstmp"]

_FLOATS = {"float32", "float64"}


def _size(value, multiple: int, arg: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0 or \
            value % multiple:
        raise InvalidArgumentError(
            f"{where}: {arg} must be a positive multiple of {multiple} ({multiple} * the hidden "
            f"size, as fluid counts it), got {value!r}")
    return int(value)


def _check_acts(where: str, **acts):
    for arg, value in acts.items():
        if value not in RNN_ACTIVATIONS:
            raise InvalidArgumentError(
                f"{where}: {arg}={value!r} is not one of {list(RNN_ACTIVATIONS[:4])}")


def _check_input(input, width: int, where: str):
    check_variable(input, "input", where, dtypes=_FLOATS)
    if input.ndim != 2 or (input.shape[1] >= 0 and input.shape[1] != width):
        raise InvalidArgumentError(
            f"{where}: input ({input.name}) must be [total steps, {width}] (the projected step "
            f"input: fc(x, size={width})) with LoD, got shape {list(input.shape)}")


def _initial(state, arg: str, width: int, where: str) -> dict:
    if state is None:
        return {}
    check_variable(state, arg, where, dtypes=_FLOATS)
    if state.ndim != 2 or (state.shape[1] >= 0 and state.shape[1] != width):
        raise InvalidArgumentError(
            f"{where}: {arg} ({state.name}) must be [number of sequences, {width}], got "
            f"{list(state.shape)}")
    return {arg.replace("_", "").upper(): [state]}


def _no_false_bias(bias_attr, where: str):
    if bias_attr is False:
        raise InvalidArgumentError(
            f"{where}: bias_attr=False, but fluid's {where} always has a bias (it also holds "
            f"the peephole weights); pass None or a ParamAttr")


def dynamic_lstm(input, size, h_0=None, c_0=None, param_attr=None, bias_attr=None,
                 use_peepholes=True, is_reverse=False, gate_activation="sigmoid",
                 cell_activation="tanh", candidate_activation="tanh", dtype="float32",
                 name=None):
    """An LSTM over each sequence of `input` ([T, size], the projected step input, a LoD
    tensor); size = 4 * hidden. Gate blocks in fluid's order: candidate, input, forget,
    output. h_0 / c_0: [number of sequences, hidden] initial states (zeros when None).
    Returns (hidden, cell), each [T, hidden] with input's LoD.

    >>> # proj = fluid.layers.fc(emb, size=4 * 32)
    >>> # hidden, cell = fluid.layers.dynamic_lstm(proj, size=4 * 32, use_peepholes=False)
    """
    where = "dynamic_lstm"
    size = _size(size, 4, "size", where)
    _check_input(input, size, where)
    _check_acts(where, gate_activation=gate_activation, cell_activation=cell_activation,
                candidate_activation=candidate_activation)
    _no_false_bias(bias_attr, where)
    d = size // 4
    helper = LayerHelper("lstm", param_attr=param_attr, bias_attr=bias_attr, name=name)
    weight = helper.create_parameter(helper.param_attr, [d, 4 * d], dtype)
    bias = helper.create_parameter(helper.bias_attr, [1, 7 * d if use_peepholes else 4 * d],
                                   dtype, is_bias=True)
    inputs = {"Input": [input], "Weight": [weight], "Bias": [bias],
              **_initial(h_0, "h_0", d, where), **_initial(c_0, "c_0", d, where)}
    outs = {slot: helper.create_variable_for_type_inference(dtype)
            for slot in ("Hidden", "Cell", "BatchGate", "BatchCellPreAct")}
    helper.append_op("lstm", inputs, {k: [v] for k, v in outs.items()},
                     {"use_peepholes": bool(use_peepholes), "is_reverse": bool(is_reverse),
                      "gate_activation": gate_activation, "cell_activation": cell_activation,
                      "candidate_activation": candidate_activation})
    return outs["Hidden"], outs["Cell"]


def dynamic_lstmp(input, size, proj_size, param_attr=None, bias_attr=None, use_peepholes=True,
                  is_reverse=False, gate_activation="sigmoid", cell_activation="tanh",
                  candidate_activation="tanh", proj_activation="tanh", dtype="float32",
                  name=None, h_0=None, c_0=None, cell_clip=None, proj_clip=None):
    """An LSTM with a recurrent projection over each sequence of `input` ([T, size], size = 4
    * hidden): r_t = proj_activation(h_t @ ProjWeight) is both the output and the recurrent
    state (as fluid 1.8's kernel does, a proj_activation other than 'identity' applies
    cell_activation). h_0 [number of sequences, proj_size], c_0 [.., hidden]; cell_clip /
    proj_clip clip c_t / r_t to [-clip, clip]. Returns (projection [T, proj_size], cell
    [T, hidden]) with input's LoD.

    >>> # proj, cell = fluid.layers.dynamic_lstmp(fluid.layers.fc(emb, 4 * 64), 4 * 64, 16)
    """
    where = "dynamic_lstmp"
    size = _size(size, 4, "size", where)
    proj_size = _size(proj_size, 1, "proj_size", where)
    _check_input(input, size, where)
    _check_acts(where, gate_activation=gate_activation, cell_activation=cell_activation,
                candidate_activation=candidate_activation, proj_activation=proj_activation)
    _no_false_bias(bias_attr, where)
    for arg, clip in (("cell_clip", cell_clip), ("proj_clip", proj_clip)):
        if clip is not None and (not isinstance(clip, numbers.Real) or clip < 0):
            raise InvalidArgumentError(
                f"{where}: {arg} must be a non-negative number or None, got {clip!r}")
    for arg, state in (("h_0", h_0), ("c_0", c_0)):  # fluid checks both dtypes before shapes
        if state is not None:
            check_variable(state, arg, where, dtypes=_FLOATS)
    d = size // 4
    helper = LayerHelper("lstmp", param_attr=param_attr, bias_attr=bias_attr, name=name)
    weight = helper.create_parameter(helper.param_attr, [proj_size, 4 * d], dtype)
    proj_weight = helper.create_parameter(helper.param_attr, [d, proj_size], dtype)
    bias = helper.create_parameter(helper.bias_attr, [1, 7 * d if use_peepholes else 4 * d],
                                   dtype, is_bias=True)
    inputs = {"Input": [input], "Weight": [weight], "ProjWeight": [proj_weight],
              "Bias": [bias], **_initial(h_0, "h_0", proj_size, where),
              **_initial(c_0, "c_0", d, where)}
    outs = {slot: helper.create_variable_for_type_inference(dtype)
            for slot in ("Projection", "Cell", "BatchGate", "BatchCellPreAct", "BatchHidden")}
    helper.append_op("lstmp", inputs, {k: [v] for k, v in outs.items()},
                     {"use_peepholes": bool(use_peepholes), "is_reverse": bool(is_reverse),
                      "cell_clip": float(cell_clip or 0.0),
                      "proj_clip": float(proj_clip or 0.0),
                      "gate_activation": gate_activation, "cell_activation": cell_activation,
                      "candidate_activation": candidate_activation,
                      "proj_activation": proj_activation})
    return outs["Projection"], outs["Cell"]


def dynamic_gru(input, size, param_attr=None, bias_attr=None, is_reverse=False,
                gate_activation="sigmoid", candidate_activation="tanh", h_0=None,
                origin_mode=False):
    """A GRU over each sequence of `input` ([T, 3 * size], the projected step input, a LoD
    tensor); size = hidden. h = u * c + (1 - u) * h_prev (origin_mode: u * h_prev + (1 - u)
    * c). h_0: [number of sequences, size] (zeros when None); bias_attr=False: no bias.
    Returns hidden [T, size] with input's LoD.

    >>> # hidden = fluid.layers.dynamic_gru(fluid.layers.fc(emb, size=3 * 32), size=32)
    """
    where = "dynamic_gru"
    size = _size(size, 1, "size", where)
    _check_input(input, 3 * size, where)
    _check_acts(where, gate_activation=gate_activation,
                candidate_activation=candidate_activation)
    helper = LayerHelper("gru", param_attr=param_attr, bias_attr=bias_attr)
    dtype = input.dtype
    weight = helper.create_parameter(helper.param_attr, [size, 3 * size], dtype)
    inputs = {"Input": [input], "Weight": [weight], **_initial(h_0, "h_0", size, where)}
    if helper.bias_attr is not False:
        inputs["Bias"] = [helper.create_parameter(helper.bias_attr, [1, 3 * size], dtype,
                                                  is_bias=True)]
    outs = {slot: helper.create_variable_for_type_inference(dtype)
            for slot in ("Hidden", "BatchGate", "BatchResetHiddenPrev", "BatchHidden")}
    helper.append_op("gru", inputs, {k: [v] for k, v in outs.items()},
                     {"is_reverse": bool(is_reverse), "gate_activation": gate_activation,
                      "activation": candidate_activation, "origin_mode": bool(origin_mode)})
    return outs["Hidden"]
