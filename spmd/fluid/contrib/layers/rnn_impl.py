"""fluid.contrib.layers' basic RNNs (contrib/layers/rnn_impl.py in fluid 1.8): BasicGRUUnit and
BasicLSTMUnit (one step, callable in a static program), basic_gru and basic_lstm (stacked,
optionally bidirectional, over a StaticRNN, with padding masked by `sequence_length`).

The numbers are fluid 1.8.5's: the GRU's gates are [r, u] (new = u * h + (1 - u) * c), the
LSTM's [i, j, f, o] with `forget_bias` added to f and, as in fluid, sigmoid / tanh always (its
LSTM unit keeps gate_activation / activation but does not use them).

>>> import spmd.fluid as fluid
>>> from spmd.fluid.contrib.layers import basic_lstm
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.data("x", [None, 5, 8], "float32")        # [batch, time, input]
...     out, last_h, last_c = basic_lstm(x, None, None, hidden_size=16, num_layers=2)
>>> out.shape, last_h.shape
((-1, 5, 16), (2, -1, 16))
"""
from __future__ import annotations

import copy

from ....core import unique_name
from ....layers.helper import LayerHelper
from ... import layers
from ...param_attr import ParamAttr

__all__ = ["BasicGRUUnit", "BasicLSTMUnit", "basic_gru", "basic_lstm"]


def _suffixed(attr, suffix: str):
    """A copy of a named ParamAttr with `suffix` added to its name; an unnamed one as it is."""
    attr = ParamAttr._to_attr(attr)
    if isinstance(attr, ParamAttr) and attr.name is not None:
        attr = copy.deepcopy(attr)
        attr.name += suffix
    return attr


class _Unit:
    """One RNN step whose parameters are made at its first call (their input size is known
    then), named under `name_scope`."""

    def __init__(self, name_scope: str, hidden_size: int, param_attr, bias_attr, dtype):
        # named as fluid's Layer names itself (<name_scope>/<Class>_<k>), once: its parameters
        # are <name_scope>/BasicLSTMUnit_0.w_0, ...
        self._helper = LayerHelper(
            type(self).__name__,
            name=unique_name.generate(f"{name_scope}/{type(self).__name__}"))
        self._hidden_size = int(hidden_size)
        self._param_attr, self._bias_attr, self._dtype = param_attr, bias_attr, dtype
        self._built = False

    def _parameter(self, attr, shape, is_bias=False):
        return self._helper.create_parameter(attr, shape, self._dtype, is_bias=is_bias)

    def __call__(self, *args):
        if not self._built:
            input_size = args[0].shape[-1]
            if input_size <= 0:
                raise ValueError(f"{type(self).__name__}: the input's last dim must be known, "
                                 f"got shape {list(args[0].shape)}")
            self._build(input_size)
            self._built = True
        return self.forward(*args)


class BasicGRUUnit(_Unit):
    """One GRU step: r, u = gate_activation([x, h] W_g + b_g);
    c = activation([x, r * h] W_c + b_c); h' = u * h + (1 - u) * c."""

    def __init__(self, name_scope, hidden_size, param_attr=None, bias_attr=None,
                 gate_activation=None, activation=None, dtype="float32"):
        super().__init__(name_scope, hidden_size, param_attr, bias_attr, dtype)
        self._gate_activation = gate_activation or layers.sigmoid
        self._activation = activation or layers.tanh

    def _build(self, input_size: int):
        h = self._hidden_size
        self._gate_weight = self._parameter(_suffixed(self._param_attr, "_gate"),
                                            [input_size + h, 2 * h])
        self._candidate_weight = self._parameter(_suffixed(self._param_attr, "_candidate"),
                                                 [input_size + h, h])
        self._gate_bias = self._parameter(_suffixed(self._bias_attr, "_gate"), [2 * h], True)
        self._candidate_bias = self._parameter(_suffixed(self._bias_attr, "_candidate"), [h],
                                               True)

    def forward(self, input, pre_hidden):
        gates = layers.matmul(layers.concat([input, pre_hidden], 1), self._gate_weight)
        gates = self._gate_activation(layers.elementwise_add(gates, self._gate_bias))
        r, u = layers.split(gates, num_or_sections=2, dim=1)
        candidate = layers.matmul(layers.concat([input, r * pre_hidden], 1),
                                  self._candidate_weight)
        c = self._activation(layers.elementwise_add(candidate, self._candidate_bias))
        return u * pre_hidden + (1 - u) * c


class BasicLSTMUnit(_Unit):
    """One LSTM step: i, j, f, o = [x, h] W + b; c' = c * sigmoid(f + forget_bias) +
    sigmoid(i) * tanh(j); h' = tanh(c') * sigmoid(o). Returns (h', c')."""

    def __init__(self, name_scope, hidden_size, param_attr=None, bias_attr=None,
                 gate_activation=None, activation=None, forget_bias=1.0, dtype="float32"):
        super().__init__(name_scope, hidden_size, param_attr, bias_attr, dtype)
        # kept as fluid keeps them; fluid 1.8's step uses sigmoid and tanh whatever they are
        self._gate_activation = gate_activation or layers.sigmoid
        self._activation = activation or layers.tanh
        self._forget_bias = layers.fill_constant([1], dtype=dtype, value=forget_bias)
        self._forget_bias.stop_gradient = False

    def _build(self, input_size: int):
        h = self._hidden_size
        self._weight = self._parameter(self._param_attr, [input_size + h, 4 * h])
        self._bias = self._parameter(self._bias_attr, [4 * h], True)

    def forward(self, input, pre_hidden, pre_cell):
        gates = layers.matmul(layers.concat([input, pre_hidden], 1), self._weight)
        gates = layers.elementwise_add(gates, self._bias)
        i, j, f, o = layers.split(gates, num_or_sections=4, dim=-1)
        forget = layers.sigmoid(layers.elementwise_add(f, self._forget_bias))
        new_cell = layers.elementwise_add(layers.elementwise_mul(pre_cell, forget),
                                          layers.elementwise_mul(layers.sigmoid(i),
                                                                 layers.tanh(j)))
        return layers.tanh(new_cell) * layers.sigmoid(o), new_cell


def _units(make, name: str, num_layers: int, param_attr, bias_attr, reverse: bool) -> list:
    tag, where = ("_reverse_layers_", "bw") if reverse else ("_layers_", "fw")
    return [make(f"{name}{tag}{i}", _suffixed(param_attr, f"_{where}_w_{i}"),
                 _suffixed(bias_attr, f"_{where}_b_{i}")) for i in range(num_layers)]


def _time_major(input, sequence_length, batch_first: bool):
    """The input as [time, batch, size] and its [time, batch] float mask (or None)."""
    if batch_first:
        input = layers.transpose(input, [1, 0, 2])
    mask = None
    if sequence_length is not None:
        mask = layers.sequence_mask(sequence_length, maxlen=layers.shape(input)[0],
                                    dtype="float32")
        mask = layers.transpose(mask, [1, 0])
    return input, mask


def _keep_padding(new, old, step_mask):
    """new where the step is inside its sequence, old past its end."""
    return (layers.elementwise_mul(new, step_mask, axis=0)
            - layers.elementwise_mul(old, step_mask - 1, axis=0))


def _run_direction(rnn_input, units, mask, initial, hidden_size, dropout, dropout_kwargs):
    """One direction's StaticRNN: `initial(layer)` gives each layer's starting states (None:
    zeros); returns the top layer's outputs and each layer's last states stacked."""
    # the initial states are cut out of init_hidden / init_cell before the step block: the
    # recurrent op reads them from the enclosing block
    given = [initial(i) for i in range(len(units))]
    rnn = layers.StaticRNN()
    with rnn.step():
        step_input = rnn.step_input(rnn_input)
        step_mask = rnn.step_input(mask) if mask is not None else None
        for i, unit in enumerate(units):
            starts = given[i]
            if starts is None:
                k = 2 if isinstance(unit, BasicLSTMUnit) else 1
                starts = [rnn.memory(batch_ref=rnn_input, shape=[-1, hidden_size],
                                     ref_batch_dim_idx=1) for _ in range(k)]
            else:
                starts = [rnn.memory(init=s) for s in starts]
            news = unit(step_input, *starts)
            news = list(news) if isinstance(news, tuple) else [news]
            if step_mask is not None:
                news = [_keep_padding(n, s, step_mask) for n, s in zip(news, starts)]
            for s, n in zip(starts, news):
                rnn.update_memory(s, n)
                rnn.step_output(n)
            step_input = news[0]
            if dropout is not None and dropout > 0.0:
                step_input = layers.dropout(step_input, dropout_prob=dropout, **dropout_kwargs)
        rnn.step_output(step_input)
    outs = rnn()
    per_layer = len(outs[:-1]) // len(units)
    lasts = []
    for k in range(per_layer):
        stacked = layers.concat([outs[i * per_layer + k][-1] for i in range(len(units))],
                                axis=0)
        lasts.append(layers.reshape(stacked, shape=[len(units), -1, hidden_size]))
    return outs[-1], lasts


def _basic_rnn(input, inits, hidden_size, num_layers, sequence_length, dropout_prob,
               bidirectional, batch_first, make, name, param_attr, bias_attr, dropout_kwargs):
    fw = _units(make, name, num_layers, param_attr, bias_attr, reverse=False)
    bw = _units(make, name, num_layers, param_attr, bias_attr, True) if bidirectional else []
    directions = 2 if bidirectional else 1
    input, mask = _time_major(input, sequence_length, batch_first)
    if inits is not None:
        inits = [layers.reshape(v, shape=[num_layers, directions, -1, hidden_size])
                 for v in inits]

    def initial(d):
        return lambda i: None if inits is None else [v[i, d] for v in inits]

    out, lasts = _run_direction(input, fw, mask, initial(0), hidden_size, dropout_prob,
                                dropout_kwargs)
    if bidirectional:
        bw_mask = layers.reverse(mask, axis=[0]) if mask is not None else None
        bw_out, bw_lasts = _run_direction(layers.reverse(input, axis=[0]), bw, bw_mask,
                                          initial(1), hidden_size, dropout_prob,
                                          dropout_kwargs)
        out = layers.concat([out, layers.reverse(bw_out, axis=[0])], axis=2)
        lasts = [layers.reshape(layers.concat([f, b], axis=1),
                                shape=[num_layers * 2, -1, hidden_size])
                 for f, b in zip(lasts, bw_lasts)]
    if batch_first:
        out = layers.transpose(out, [1, 0, 2])
    return (out, *lasts)


def basic_gru(input, init_hidden, hidden_size, num_layers=1, sequence_length=None,
              dropout_prob=0.0, bidirectional=False, batch_first=True, param_attr=None,
              bias_attr=None, gate_activation=None, activation=None, dtype="float32",
              name="basic_gru"):
    """A stacked GRU over `input` ([batch, time, size] with batch_first, else time first):
    returns (outputs [batch, time, hidden * directions], last hidden [layers * directions,
    batch, hidden]). init_hidden: [layers * directions, batch, hidden] or None (zeros);
    sequence_length: [batch] int lengths, the states kept past each sequence's end.

    >>> # out, last_hidden = basic_gru(x, None, hidden_size=16, bidirectional=True)
    """
    def make(scope, w, b):
        return BasicGRUUnit(scope, hidden_size, w, b, gate_activation, activation, dtype)

    inits = None if init_hidden is None else [init_hidden]
    return _basic_rnn(input, inits, hidden_size, num_layers, sequence_length, dropout_prob,
                      bidirectional, batch_first, make, name, param_attr, bias_attr, {})


def basic_lstm(input, init_hidden, init_cell, hidden_size, num_layers=1,
               sequence_length=None, dropout_prob=0.0, bidirectional=False, batch_first=True,
               param_attr=None, bias_attr=None, gate_activation=None, activation=None,
               forget_bias=1.0, dtype="float32", name="basic_lstm"):
    """A stacked LSTM over `input`: returns (outputs, last hidden, last cell), shaped as
    basic_gru's; init_hidden and init_cell both given or both None (zeros). Dropout between
    layers is upscale_in_train, as in fluid.

    >>> # out, last_h, last_c = basic_lstm(x, h0, c0, hidden_size=16, num_layers=2)
    """
    def make(scope, w, b):
        return BasicLSTMUnit(scope, hidden_size, w, b, gate_activation, activation,
                             forget_bias, dtype)

    if (init_hidden is None) != (init_cell is None):
        raise ValueError("basic_lstm: give both init_hidden and init_cell, or neither")
    inits = None if init_hidden is None else [init_hidden, init_cell]
    return _basic_rnn(input, inits, hidden_size, num_layers, sequence_length, dropout_prob,
                      bidirectional, batch_first, make, name, param_attr, bias_attr,
                      {"dropout_implementation": "upscale_in_train"})
