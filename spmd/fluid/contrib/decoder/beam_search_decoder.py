"""fluid.contrib.decoder.beam_search_decoder: fluid 1.8's contrib seq2seq decoder API.

A StateCell names a decoder's inputs and states (each an InitState) and a `state_updater`
that computes the new states from them; the same cell then drives a TrainingDecoder (a
DynamicRNN over the target sequence: states are its memories) and a BeamSearchDecoder (a
While loop: states live in tensor arrays indexed by the step, candidates are grown with
beam_search and gathered with beam_search_decode).

>>> import spmd.fluid as fluid
>>> from spmd.fluid.contrib.decoder.beam_search_decoder import InitState, StateCell
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     context = fluid.data("context", [None, 4], "float32")
...     cell = StateCell(inputs={"x": None}, states={"h": InitState(init=context)},
...                      out_state="h")
>>> cell.out_state() is not None
True
"""
from __future__ import annotations

import contextlib

from .... import layers
from ....core.variable import Variable
from ....layers.helper import LayerHelper

__all__ = ["BeamSearchDecoder", "InitState", "StateCell", "TrainingDecoder"]

_ARRAY = "LOD_TENSOR_ARRAY"


class _DecoderType:
    TRAINING = 1
    BEAM_SEARCH = 2


@contextlib.contextmanager
def _building_in(block):
    """Make `block` the one layers append to (a loop's enclosing block, while the loop body
    is being built), then the body again."""
    program = block.program
    saved = program._current_block_idx
    program._current_block_idx = block.idx
    try:
        yield
    finally:
        program._current_block_idx = saved


class InitState:
    """A state's initial value: `init` itself, or a [batch, *shape] tensor of `value` shaped
    after `init_boot`'s batch. need_reorder: the value is per source sequence and must follow
    the decoder's reordering of sequences by length (a DynamicRNN memory's need_reorder)."""

    def __init__(self, init=None, shape=None, value=0.0, init_boot=None, need_reorder=False,
                 dtype="float32"):
        if init is not None:
            self._init = init
        elif init_boot is None:
            raise ValueError("init_boot must be provided to infer the shape of InitState .\n")
        else:
            self._init = layers.fill_constant_batch_size_like(
                input=init_boot, value=value, shape=shape, dtype=dtype)
        self._shape, self._value = shape, value
        self._need_reorder, self._dtype = need_reorder, dtype

    @property
    def value(self):
        return self._init

    @property
    def need_reorder(self):
        return self._need_reorder


class _MemoryState:
    """A state of a TrainingDecoder: a memory of its DynamicRNN."""

    def __init__(self, rnn, init_state: InitState):
        self._rnn = rnn
        self._memory = rnn.memory(init=init_state.value, need_reorder=init_state.need_reorder)

    def get_state(self):
        return self._memory

    def update_state(self, state):
        self._rnn.update_memory(self._memory, state)


class _ArrayState:
    """A state of a BeamSearchDecoder: a tensor array with its own step counter, both made in
    the loop's enclosing block; element 0 is the initial value."""

    def __init__(self, block, init_state: InitState):
        with _building_in(block):
            self._counter = layers.zeros([1], "int64", force_cpu=True)
            self._counter.stop_gradient = True
            self._array = layers.array_write(init_state.value, self._counter)

    def get_state(self):
        return layers.array_read(self._array, self._counter)

    def update_state(self, state):
        layers.increment(self._counter, value=1, in_place=True)
        layers.array_write(state, self._counter, array=self._array)


class StateCell:
    """The step of a decoder: `inputs` (name -> placeholder, usually None), `states` (name
    -> InitState), the state that is the step's output (`out_state`), and the updater
    registered with @cell.state_updater, which reads get_input / get_state and calls
    set_state."""

    def __init__(self, inputs, states, out_state, name=None):
        self._helper = LayerHelper("state_cell", name=name)
        self._cur_states: dict = {}
        self._state_names: list = []
        for state_name, state in states.items():
            if not isinstance(state, InitState):
                raise ValueError("state must be an InitState object.")
            self._cur_states[state_name] = state
            self._state_names.append(state_name)
        self._inputs = inputs
        self._cur_decoder_obj = None
        self._in_decoder = False
        self._states_holder: dict = {}
        self._switched_decoder = False
        self._state_updater = None
        self._out_state = out_state
        if self._out_state not in self._cur_states:
            raise ValueError("out_state must be one state in states")

    # -- the decoder that drives the cell ------------------------------------------------------
    def _enter_decoder(self, decoder_obj):
        if self._in_decoder or self._cur_decoder_obj is not None:
            raise ValueError("StateCell has already entered a decoder.")
        self._in_decoder = True
        self._cur_decoder_obj = decoder_obj
        self._switched_decoder = False

    def _leave_decoder(self, decoder_obj):
        if not self._in_decoder:
            raise ValueError("StateCell not in decoder, invalid leaving operation.")
        if self._cur_decoder_obj is not decoder_obj:
            raise ValueError("Inconsistent decoder object in StateCell.")
        self._in_decoder = False
        self._cur_decoder_obj = None
        self._switched_decoder = False

    def _switch_decoder(self):
        """Give every state its holder in the current decoder (a memory or an array) and
        read it back as this step's value."""
        if not self._in_decoder:
            raise ValueError("StateCell must be enter a decoder.")
        if self._switched_decoder:
            raise ValueError("StateCell already done switching.")
        decoder = self._cur_decoder_obj
        for state_name in self._state_names:
            holders = self._states_holder.setdefault(state_name, {})
            if id(decoder) not in holders:
                state = self._cur_states[state_name]
                if not isinstance(state, InitState):
                    raise ValueError(f"Current type of state is {type(state)}, should be an "
                                     f"InitState object.")
                if decoder.type == _DecoderType.TRAINING:
                    holders[id(decoder)] = _MemoryState(decoder.dynamic_rnn, state)
                elif decoder.type == _DecoderType.BEAM_SEARCH:
                    holders[id(decoder)] = _ArrayState(decoder._parent_block(), state)
                else:
                    raise ValueError("Unknown decoder type, only support [TRAINING, "
                                     "BEAM_SEARCH]")
            self._cur_states[state_name] = holders[id(decoder)].get_state()
        self._switched_decoder = True

    def _ensure_switched(self):
        if self._in_decoder and not self._switched_decoder:
            self._switch_decoder()

    # -- what the updater and the decoders call -----------------------------------------------
    def get_state(self, state_name):
        self._ensure_switched()
        if state_name not in self._cur_states:
            raise ValueError(f"Unknown state {state_name}. Please make sure _switch_decoder() "
                             f"invoked.")
        return self._cur_states[state_name]

    def get_input(self, input_name):
        if input_name not in self._inputs or self._inputs[input_name] is None:
            raise ValueError(f"Invalid input {input_name}.")
        return self._inputs[input_name]

    def set_state(self, state_name, state_value):
        self._cur_states[state_name] = state_value

    def state_updater(self, updater):
        """Register `updater(cell)` as the step's state computation (a decorator)."""
        self._state_updater = updater

        def _decorator(state_cell):
            if state_cell == self:
                raise TypeError("Updater should only accept a StateCell object as argument.")
            updater(state_cell)
        return _decorator

    def compute_state(self, inputs):
        """Set the step's inputs (name -> Variable) and run the updater."""
        self._ensure_switched()
        for input_name, input_value in inputs.items():
            if input_name not in self._inputs:
                raise ValueError(f"Unknown input {input_name}. Please make sure {input_name} "
                                 f"in input place holder.")
            self._inputs[input_name] = input_value
        if self._state_updater is None:
            raise ValueError("StateCell has no state updater: decorate one with "
                             "@cell.state_updater")
        self._state_updater(self)

    def update_states(self):
        """Hand the states set this step to their holders (the next step's values)."""
        self._ensure_switched()
        for state_name, holders in self._states_holder.items():
            if id(self._cur_decoder_obj) not in holders:
                raise ValueError("Unknown decoder object, please make sure switch_decoder "
                                 "been invoked.")
            holders[id(self._cur_decoder_obj)].update_state(self._cur_states[state_name])

    def out_state(self):
        return self._cur_states[self._out_state]


class TrainingDecoder:
    """Teacher-forced decoding over the target sequences: a DynamicRNN whose memories are
    the cell's states. Inside `with decoder.block():` take step_input / static_input, run
    the cell, update_states, output; decoder() then gives the outputs."""

    BEFORE_DECODER, IN_DECODER, AFTER_DECODER = 0, 1, 2

    def __init__(self, state_cell, name=None):
        self._helper = LayerHelper("training_decoder", name=name)
        self._status = TrainingDecoder.BEFORE_DECODER
        self._dynamic_rnn = layers.DynamicRNN()
        self._type = _DecoderType.TRAINING
        self._state_cell = state_cell
        self._state_cell._enter_decoder(self)

    @contextlib.contextmanager
    def block(self):
        if self._status != TrainingDecoder.BEFORE_DECODER:
            raise ValueError("decoder.block() can only be invoked once")
        self._status = TrainingDecoder.IN_DECODER
        with self._dynamic_rnn.block():
            yield
        self._status = TrainingDecoder.AFTER_DECODER
        self._state_cell._leave_decoder(self)

    @property
    def state_cell(self):
        self._assert_in_decoder_block("state_cell")
        return self._state_cell

    @property
    def dynamic_rnn(self):
        return self._dynamic_rnn

    @property
    def type(self):
        return self._type

    def step_input(self, x):
        self._assert_in_decoder_block("step_input")
        return self._dynamic_rnn.step_input(x)

    def static_input(self, x):
        self._assert_in_decoder_block("static_input")
        return self._dynamic_rnn.static_input(x)

    def __call__(self, *args, **kwargs):
        if self._status != TrainingDecoder.AFTER_DECODER:
            raise ValueError("Output of training decoder can only be visited outside the "
                             "block.")
        return self._dynamic_rnn(*args, **kwargs)

    def output(self, *outputs):
        self._assert_in_decoder_block("output")
        self._dynamic_rnn.output(*outputs)

    def _assert_in_decoder_block(self, method):
        if self._status != TrainingDecoder.IN_DECODER:
            raise ValueError(f"{method} should be invoked inside block of TrainingDecoder "
                             f"object.")


class BeamSearchDecoder:
    """Beam search over a While loop of at most max_len steps: each step embeds the previous
    ids, expands the states and inputs to the candidates, runs the cell, scores the
    vocabulary with a softmax fc, keeps topk_size per candidate, and beam_search keeps
    beam_size per source; the loop stops early when no candidate is left. decoder() gives
    (ids, scores) as beam_search_decode's two-level LoD tensors. Call decode() for the whole
    step, or build your own in `with decoder.block():` with read_array / update_array."""

    BEFORE_BEAM_SEARCH_DECODER, IN_BEAM_SEARCH_DECODER, AFTER_BEAM_SEARCH_DECODER = 0, 1, 2

    def __init__(self, state_cell, init_ids, init_scores, target_dict_dim, word_dim,
                 input_var_dict=None, topk_size=50, sparse_emb=True, max_len=100,
                 beam_size=1, end_id=1, name=None):
        self._helper = LayerHelper("beam_search_decoder", name=name)
        self._counter = layers.zeros(shape=[1], dtype="int64")
        self._counter.stop_gradient = True
        self._type = _DecoderType.BEAM_SEARCH
        self._max_len = layers.fill_constant(shape=[1], dtype="int64", value=max_len)
        self._cond = layers.less_than(
            x=self._counter, y=layers.fill_constant(shape=[1], dtype="int64", value=max_len))
        self._while_op = layers.While(self._cond)
        self._state_cell = state_cell
        self._state_cell._enter_decoder(self)
        self._status = BeamSearchDecoder.BEFORE_BEAM_SEARCH_DECODER
        self._zero_idx = layers.fill_constant(shape=[1], value=0, dtype="int64",
                                              force_cpu=True)
        self._array_dict: dict = {}
        self._array_link: list = []
        self._ids_array = None
        self._scores_array = None
        self._beam_size = beam_size
        self._end_id = end_id
        self._init_ids = init_ids
        self._init_scores = init_scores
        self._target_dict_dim = target_dict_dim
        self._topk_size = topk_size
        self._sparse_emb = sparse_emb
        self._word_dim = word_dim
        self._input_var_dict = input_var_dict if input_var_dict is not None else {}

    @contextlib.contextmanager
    def block(self):
        """The loop body; at its end (while the loop goes on) the step counter advances and
        every update_array value is written at the new step."""
        if self._status != BeamSearchDecoder.BEFORE_BEAM_SEARCH_DECODER:
            raise ValueError("block() can only be invoke once.")
        self._status = BeamSearchDecoder.IN_BEAM_SEARCH_DECODER
        with self._while_op.block():
            yield
            with layers.Switch() as switch:
                with switch.case(self._cond):
                    layers.increment(x=self._counter, value=1.0, in_place=True)
                    for value, array in self._array_link:
                        layers.array_write(x=value, i=self._counter, array=array)
                    layers.less_than(x=self._counter, y=self._max_len, cond=self._cond)
        self._status = BeamSearchDecoder.AFTER_BEAM_SEARCH_DECODER
        self._state_cell._leave_decoder(self)

    @property
    def type(self):
        return self._type

    def early_stop(self):
        """End the loop after this step."""
        layers.fill_constant(shape=[1], value=0, dtype="bool", force_cpu=True, out=self._cond)

    def decode(self):
        """The standard step (see the class); builds the whole loop."""
        with self.block():
            prev_ids = self.read_array(init=self._init_ids, is_ids=True)
            prev_scores = self.read_array(init=self._init_scores, is_scores=True)
            prev_ids_embedding = layers.embedding(
                input=prev_ids, size=[self._target_dict_dim, self._word_dim],
                dtype="float32", is_sparse=self._sparse_emb)
            feed_dict, update_dict = {}, {}
            for init_var_name, init_var in self._input_var_dict.items():
                if init_var_name not in self.state_cell._inputs:
                    raise ValueError("Variable " + init_var_name + " not found in "
                                     "StateCell!\n")
                read_var = self.read_array(init=init_var)
                update_dict[init_var_name] = read_var
                feed_dict[init_var_name] = layers.sequence_expand(read_var, prev_scores)
            for state_str in self._state_cell._state_names:
                prev_state = self.state_cell.get_state(state_str)
                self.state_cell.set_state(state_str,
                                          layers.sequence_expand(prev_state, prev_scores))
            for input_name in self._state_cell._inputs:
                if input_name not in feed_dict:
                    feed_dict[input_name] = prev_ids_embedding
            self.state_cell.compute_state(inputs=feed_dict)
            current_state = self.state_cell.out_state()
            current_state_with_lod = layers.lod_reset(x=current_state, y=prev_scores)
            scores = layers.fc(input=current_state_with_lod, size=self._target_dict_dim,
                               act="softmax")
            topk_scores, topk_indices = layers.topk(scores, k=self._topk_size)
            accu_scores = layers.elementwise_add(
                x=layers.log(x=topk_scores), y=layers.reshape(prev_scores, shape=[-1]),
                axis=0)
            # fluid 1.8's decode() passes end_id=1 to beam_search whatever end_id says
            selected_ids, selected_scores = layers.beam_search(
                prev_ids, prev_scores, topk_indices, accu_scores, self._beam_size, end_id=1,
                level=0)
            with layers.Switch() as switch:
                with switch.case(layers.is_empty(selected_ids)):
                    self.early_stop()
                with switch.default():
                    self.state_cell.update_states()
                    self.update_array(prev_ids, selected_ids)
                    self.update_array(prev_scores, selected_scores)
                    for update_name, var_to_update in update_dict.items():
                        self.update_array(var_to_update, feed_dict[update_name])

    def read_array(self, init, is_ids=False, is_scores=False):
        """A tensor array (made in the enclosing block, `init` at step 0) read at the current
        step; is_ids / is_scores mark the arrays decoder() decodes."""
        self._assert_in_decoder_block("read_array")
        if is_ids and is_scores:
            raise ValueError("Shouldn't mark current array be ids array andscores array at "
                             "the same time.")
        if not isinstance(init, Variable):
            raise TypeError("The input argument `init` must be a Variable.")
        with _building_in(self._parent_block()):
            array = layers.array_write(init, self._zero_idx)
        if is_ids:
            self._ids_array = array
        elif is_scores:
            self._scores_array = array
        read_value = layers.array_read(array=array, i=self._counter)
        self._array_dict[read_value.name] = array
        return read_value

    def update_array(self, array, value):
        """Write `value` into the array `array` was read from, at the next step."""
        self._assert_in_decoder_block("update_array")
        if not isinstance(array, Variable):
            raise TypeError("The input argument `array` of  must be a Variable.")
        if not isinstance(value, Variable):
            raise TypeError("The input argument `value` of must be a Variable.")
        target = self._array_dict.get(array.name)
        if target is None:
            raise ValueError("Please invoke read_array before update_array.")
        self._array_link.append((value, target))

    def __call__(self):
        if self._status != BeamSearchDecoder.AFTER_BEAM_SEARCH_DECODER:
            raise ValueError("Output of BeamSearchDecoder object can only be visited outside "
                             "the block.")
        return layers.beam_search_decode(ids=self._ids_array, scores=self._scores_array,
                                         beam_size=self._beam_size, end_id=self._end_id)

    @property
    def state_cell(self):
        self._assert_in_decoder_block("state_cell")
        return self._state_cell

    def _parent_block(self):
        program = self._helper.main_program
        parent_idx = program.current_block().parent_idx
        if parent_idx < 0:
            raise ValueError(f"Invalid block with index {parent_idx}.")
        return program.block(parent_idx)

    def _assert_in_decoder_block(self, method):
        if self._status != BeamSearchDecoder.IN_BEAM_SEARCH_DECODER:
            raise ValueError(f"{method} should be invoked inside block of BeamSearchDecoder "
                             f"object.")
