"""fluid 1.8's RNN cell API (python/paddle/fluid/layers/rnn.py): RNNCell, GRUCell, LSTMCell,
rnn (a cell unrolled over time with StaticRNN, optional sequence_length masking and
is_reverse) and birnn (paddle 2.0's fluid.layers.birnn: a forward and a reversed rnn, outputs
concatenated on the last axis).

The cells are built from matmul and elementwise ops, as fluid 1.8's BasicGRUUnit and
BasicLSTMUnit are, with the same parameter names and shapes (so fluid checkpoints load):
GRUCell `GRUCell/BasicGRUUnit_<n>.w_0` [in + H, 2H] (reset, update gates), `.w_1` [in + H, H]
(candidate), `.b_0` [2H], `.b_1` [H]; LSTMCell `LSTMCell/BasicLSTMUnit_<n>.w_0` [in + H, 4H]
(gates i, j, f, o) and `.b_0` [4H]. Parameters are made on the cell's first call.

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.data("x", [None, 7, 16], "float32")       # [batch, time, features]
...     length = fluid.data("length", [None], "int64")
...     cell = fluid.layers.GRUCell(hidden_size=32)
...     out, state = fluid.layers.rnn(cell, x, sequence_length=length)   # [batch, 7, 32]
"""
from __future__ import annotations

import copy
import numbers
import warnings

from ..core import unique_name
from ..core.variable import Variable
from ..errors import ArgumentTypeError, InvalidArgumentError
from . import rnn_nest as nest
from .creation import fill_constant_batch_size_like, reverse
from .creation import range as arange
from .helper import LayerHelper
from .logic import less_than
from .manip import shape
from .math_ops import elementwise_add, elementwise_mul, matmul, sigmoid, tanh
from .param_attr import ParamAttr
from .static_rnn import StaticRNN
from .tensor import cast, concat, fill_constant, split, squeeze, transpose, unsqueeze
from .tensor import slice as slice_

__all__ = ["GRUCell", "LSTMCell", "RNNCell", "birnn", "rnn"]

_FLOATS = ("float32", "float64")


def _check_float_var(value, arg: str, where: str):
    # TypeErrors too, as fluid's check_variable_and_dtype
    if not isinstance(value, Variable):
        raise ArgumentTypeError(
            f"{where}: {arg} must be a Variable, got {type(value).__name__}")
    if value.dtype not in _FLOATS:
        raise ArgumentTypeError(
            f"{where}: {arg} ({value.name}) must be float32 or float64, got {value.dtype}")
    return value


def _hidden_size(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ArgumentTypeError(f"{where}: hidden_size must be a positive int, got {value!r}")
    return int(value)


def _float_dtype(dtype, where: str) -> str:
    if dtype not in _FLOATS:
        raise ArgumentTypeError(f"{where}: dtype must be 'float32' or 'float64', got {dtype!r}")
    return dtype


class RNNCell:
    """The base of the cells `rnn` and the decoders run: `call(inputs, states, **kwargs)`
    returns (outputs, new_states); `state_shape` (and optionally `state_dtype`) describe the
    states so `get_initial_states` can make them.

    >>> # class MyCell(fluid.layers.RNNCell):
    >>> #     def call(self, inputs, states): h = fluid.layers.fc([inputs, states], 8); return h, h
    >>> #     state_shape = [8]
    """

    def call(self, inputs, states, **kwargs):
        raise InvalidArgumentError(
            f"{type(self).__name__} derives from RNNCell but does not define "
            f"call(self, inputs, states): define it to return (outputs, new_states)")

    def __call__(self, inputs, states, **kwargs):
        return self.call(inputs, states, **kwargs)

    def get_initial_states(self, batch_ref, shape=None, dtype="float32", init_value=0,
                           batch_dim_idx=0):
        """States filled with `init_value`, shaped [batch] + shape (default `state_shape`),
        the batch size read from dim `batch_dim_idx` of (the first tensor of) `batch_ref`."""
        where = f"{type(self).__name__}.get_initial_states"
        ref = nest.flatten(batch_ref)[0]
        if not isinstance(ref, Variable):
            raise ArgumentTypeError(f"{where}: batch_ref must be a Variable, got {ref!r}")
        shapes = self.state_shape if shape is None else shape
        if dtype is None:
            dtype = getattr(self, "state_dtype", "float32")
        shapes = nest.map_shapes(lambda s: s if s[0] == -1 else [-1, *s], shapes)
        dtypes = nest.flatten(dtype)
        if len(dtypes) == 1:
            dtypes = dtypes * len(nest.flatten_shapes(shapes))
        flat = [fill_constant_batch_size_like(ref, s, _float_dtype(d, where), init_value,
                                              input_dim_idx=batch_dim_idx)
                for s, d in zip(nest.flatten_shapes(shapes), dtypes)]
        return nest.pack_shapes_as(shapes, flat)

    @property
    def state_shape(self):
        raise InvalidArgumentError(
            f"{type(self).__name__} has no state_shape: define the property (a shape such as "
            f"[hidden_size], or a structure of them), or pass initial_states / shape")


def _suffixed(attr, suffix: str):
    """A copy of `attr` with `suffix` on its name (fluid's per-parameter names)."""
    attr = ParamAttr._to_attr(attr)
    if isinstance(attr, ParamAttr) and attr.name is not None:
        attr = copy.deepcopy(attr)
        attr.name += suffix
    return attr


class GRUCell(RNNCell):
    """A GRU step as fluid 1.8's BasicGRUUnit computes it:
    r, u = gate_act([x, h] @ W_gate + b_gate); c = act([x, r * h] @ W_cand + b_cand);
    h' = u * h + (1 - u) * c. Returns (h', h'). `gate_activation` / `activation` are
    callables (default fluid.layers.sigmoid / tanh).

    >>> # cell = fluid.layers.GRUCell(hidden_size=32)
    >>> # out, h = cell(x_t, h_prev)
    """

    def __init__(self, hidden_size, param_attr=None, bias_attr=None, gate_activation=None,
                 activation=None, dtype="float32", name="GRUCell"):
        self.hidden_size = _hidden_size(hidden_size, "GRUCell")
        self.dtype = _float_dtype(dtype, "GRUCell")
        self.param_attr, self.bias_attr = param_attr, bias_attr
        for what, fn in (("gate_activation", gate_activation), ("activation", activation)):
            if fn is not None and not callable(fn):
                raise InvalidArgumentError(
                    f"GRUCell: {what} must be a callable such as fluid.layers.sigmoid or "
                    f"fluid.layers.tanh (fluid 1.8 calls it on the gates), got {fn!r}")
        self.gate_activation = gate_activation or sigmoid
        self.activation = activation or tanh
        self.helper = LayerHelper("GRUCell", name=unique_name.generate(f"{name}/BasicGRUUnit"))
        self._params = None

    def _build(self, input_size: int):
        h, helper = self.hidden_size, self.helper
        p, b = self.param_attr, self.bias_attr
        self._params = (
            helper.create_parameter(_suffixed(p, "_gate"), [input_size + h, 2 * h], self.dtype),
            helper.create_parameter(_suffixed(p, "_candidate"), [input_size + h, h], self.dtype),
            helper.create_parameter(_suffixed(b, "_gate"), [2 * h], self.dtype, is_bias=True),
            helper.create_parameter(_suffixed(b, "_candidate"), [h], self.dtype,
                                    is_bias=True))

    def call(self, inputs, states):
        _check_float_var(inputs, "inputs", "GRUCell")
        _check_float_var(states, "states", "GRUCell")
        if self._params is None:
            self._build(_input_size(inputs, "GRUCell"))
        gate_w, cand_w, gate_b, cand_b = self._params
        gates = self.gate_activation(
            elementwise_add(matmul(concat([inputs, states], 1), gate_w), gate_b))
        r, u = split(gates, 2, dim=1)
        cand = matmul(concat([inputs, r * states], 1), cand_w)
        c = self.activation(elementwise_add(cand, cand_b))
        new_hidden = u * states + (1 - u) * c
        return new_hidden, new_hidden

    @property
    def state_shape(self):
        return [self.hidden_size]


class LSTMCell(RNNCell):
    """An LSTM step as fluid 1.8's BasicLSTMUnit computes it: i, j, f, o = split([x, h] @ W
    + b); c' = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j); h' = tanh(c') *
    sigmoid(o). Returns (h', [h', c']); states are [h, c].

    As in fluid 1.8, the gates always use sigmoid and tanh whatever `gate_activation` and
    `activation` say (spmd keeps fluid's numbers and warns when they are given).

    >>> # cell = fluid.layers.LSTMCell(hidden_size=32)
    >>> # out, (h, c) = cell(x_t, [h_prev, c_prev])
    """

    def __init__(self, hidden_size, param_attr=None, bias_attr=None, gate_activation=None,
                 activation=None, forget_bias=1.0, dtype="float32", name="LSTMCell"):
        self.hidden_size = _hidden_size(hidden_size, "LSTMCell")
        self.dtype = _float_dtype(dtype, "LSTMCell")
        self.param_attr, self.bias_attr = param_attr, bias_attr
        if gate_activation is not None or activation is not None:
            warnings.warn("LSTMCell: fluid 1.8 ignores gate_activation and activation (its "
                          "gates are always sigmoid and tanh); spmd does the same",
                          stacklevel=2)
        self.helper = LayerHelper("LSTMCell",
                                  name=unique_name.generate(f"{name}/BasicLSTMUnit"))
        self.forget_bias = fill_constant([1], self.dtype, float(forget_bias))
        self.forget_bias.stop_gradient = False
        self._params = None

    def call(self, inputs, states):
        _check_float_var(inputs, "inputs", "LSTMCell")
        if not isinstance(states, list) or len(states) != 2:
            raise ArgumentTypeError(
                f"LSTMCell: states must be a list [hidden, cell], got {states!r}")
        pre_hidden, pre_cell = (_check_float_var(s, f"states[{k}]", "LSTMCell")
                                for k, s in enumerate(states))
        if self._params is None:
            h = self.hidden_size
            self._params = (
                self.helper.create_parameter(
                    self.param_attr, [_input_size(inputs, "LSTMCell") + h, 4 * h], self.dtype),
                self.helper.create_parameter(self.bias_attr, [4 * h], self.dtype,
                                             is_bias=True))
        weight, bias = self._params
        gates = elementwise_add(matmul(concat([inputs, pre_hidden], 1), weight), bias)
        i, j, f, o = split(gates, 4, dim=-1)
        new_cell = elementwise_add(
            elementwise_mul(pre_cell, sigmoid(elementwise_add(f, self.forget_bias))),
            elementwise_mul(sigmoid(i), tanh(j)))
        new_hidden = tanh(new_cell) * sigmoid(o)
        return new_hidden, [new_hidden, new_cell]

    @property
    def state_shape(self):
        return [[self.hidden_size], [self.hidden_size]]


def _input_size(inputs, where: str) -> int:
    size = inputs.shape[-1]
    if size <= 0:
        raise InvalidArgumentError(
            f"{where}: the input's last dim must be known to make the weights, got shape "
            f"{list(inputs.shape)}; give fluid.data a fixed feature size")
    return size


# -- rnn, birnn ---------------------------------------------------------------------------------

def _transpose_batch_time(x):
    return transpose(x, [1, 0, *[k + 2 for k in range(len(x.shape) - 2)]])


def _time_mask(sequence_length, time_major_input, dtype: str):
    """[time, batch] mask: 1 where t < sequence_length[b] (fluid's sequence_mask, transposed)."""
    if sequence_length.dtype not in ("int32", "int64"):
        raise ArgumentTypeError(
            f"rnn: sequence_length ({sequence_length.name}) must be int32 or int64, got "
            f"{sequence_length.dtype}")
    steps = arange(0, _shape_dim(time_major_input, 0), 1, sequence_length.dtype)
    lengths = sequence_length
    if len(lengths.shape) == 2 and lengths.shape[-1] == 1:
        lengths = squeeze(lengths, [1])
    mask = less_than(unsqueeze(steps, [1]), unsqueeze(lengths, [0]))
    mask.stop_gradient = True
    return cast(mask, dtype)


def _shape_dim(x, axis: int):
    return slice_(shape(x), axes=[0], starts=[axis], ends=[axis + 1])


def _maybe_copy(state, new_state, step_mask):
    # new where the step is inside the sequence (mask 1), the old state past its end
    return elementwise_mul(new_state, step_mask, axis=0) - elementwise_mul(
        state, step_mask - 1, axis=0)


def rnn(cell, inputs, initial_states=None, sequence_length=None, time_major=False,
        is_reverse=False, **kwargs):
    """Run `cell` over the time steps of `inputs` ([batch, time, ...], or [time, batch, ...]
    with time_major; a Variable or a structure of them). Returns (outputs, final_states):
    the cell's outputs at every step (same major-ness as inputs) and its states after the
    last step. With `sequence_length` ([batch] ints), a sequence's states stop changing past
    its length (its outputs there are the cell's outputs on the padding). `is_reverse` runs
    from the last step to the first (outputs stay in input order). `kwargs` go to cell.call.

    >>> # out, h = fluid.layers.rnn(fluid.layers.GRUCell(32), emb, sequence_length=length)
    """
    if not isinstance(cell, RNNCell) and not callable(getattr(cell, "call", None)):
        raise ArgumentTypeError(f"rnn: cell must be an RNNCell, got {type(cell).__name__}")
    for k, x in enumerate(nest.flatten(inputs)):
        _check_float_var(x, f"inputs[{k}]", "rnn")
    if sequence_length is not None and not isinstance(sequence_length, Variable):
        raise ArgumentTypeError(
            f"rnn: sequence_length must be a Variable or None, got {sequence_length!r}")
    first = nest.flatten(inputs)[0]
    if initial_states is None:
        initial_states = cell.get_initial_states(
            batch_ref=inputs, dtype=first.dtype, batch_dim_idx=1 if time_major else 0)
    for s in nest.flatten(initial_states):
        _check_float_var(s, "every initial state", "rnn")
        s.stop_gradient = False
    if not time_major:
        inputs = nest.map_structure(_transpose_batch_time, inputs)
    first = nest.flatten(inputs)[0]
    mask = None
    if sequence_length is not None:
        mask = _time_mask(sequence_length, first, nest.flatten(initial_states)[0].dtype)
    if is_reverse:
        inputs = nest.map_structure(lambda x: reverse(x, axis=[0]), inputs)
        mask = reverse(mask, axis=[0]) if mask is not None else None

    static = StaticRNN()
    with static.step():
        step_inputs = nest.map_structure(static.step_input, inputs)
        states = nest.map_structure(static.memory, initial_states)
        outputs, new_states = cell.call(step_inputs, states, **kwargs)
        if not nest.same_structure(states, new_states):
            raise InvalidArgumentError(
                f"rnn: {type(cell).__name__}.call returned states of another structure than "
                f"it was given ({nest.describe(new_states)} for {nest.describe(states)})")
        if mask is not None:
            step_mask = static.step_input(mask)
            new_states = nest.map_structure(
                lambda s, n: _maybe_copy(s, n, step_mask), states, new_states)
        nest.map_structure(static.update_memory, states, new_states)
        flat_outputs = nest.flatten(outputs)
        for o in flat_outputs + nest.flatten(new_states):
            static.step_output(o)
    results = static()
    results = results if isinstance(results, list) else [results]
    final_outputs = nest.pack_sequence_as(outputs, results[:len(flat_outputs)])
    final_states = nest.pack_sequence_as(
        new_states, [x[-1] for x in results[len(flat_outputs):]])
    if is_reverse:
        final_outputs = nest.map_structure(lambda x: reverse(x, axis=[0]), final_outputs)
    if not time_major:
        final_outputs = nest.map_structure(_transpose_batch_time, final_outputs)
    return final_outputs, final_states


def birnn(cell_fw, cell_bw, inputs, initial_states=None, sequence_length=None,
          time_major=False, **kwargs):
    """A forward rnn of `cell_fw` and a reversed rnn of `cell_bw` over the same inputs
    (paddle 2.0's fluid.layers.birnn). Returns (outputs, (states_fw, states_bw)), the two
    directions' outputs concatenated on the last axis; `initial_states` is
    (states_fw, states_bw) or None.

    >>> # out, (h_fw, h_bw) = fluid.layers.birnn(GRUCell(32), GRUCell(32), emb, None, length)
    """
    if initial_states is None:
        states_fw = states_bw = None
    elif isinstance(initial_states, (list, tuple)) and len(initial_states) == 2:
        states_fw, states_bw = initial_states
    else:
        raise InvalidArgumentError(
            f"birnn: initial_states must be (states_fw, states_bw) or None, got "
            f"{initial_states!r}")
    outputs_fw, states_fw = rnn(cell_fw, inputs, states_fw, sequence_length,
                                time_major=time_major, **kwargs)
    outputs_bw, states_bw = rnn(cell_bw, inputs, states_bw, sequence_length,
                                time_major=time_major, is_reverse=True, **kwargs)
    outputs = nest.map_structure(lambda a, b: concat([a, b], -1), outputs_fw, outputs_bw)
    return outputs, (states_fw, states_bw)
