"""fluid 1.8's decoding API (python/paddle/fluid/layers/rnn.py): Decoder, BeamSearchDecoder
and dynamic_decode, which runs a decoder step by step in a While loop until every sequence is
finished (or `max_step_num` steps have run).

BeamSearchDecoder keeps fluid's state layout: cell states [batch, beam, ...], log_probs
[batch, beam] (float32, the first beam 0 and the others -1e9 at the start), finished
[batch, beam] (bool) and lengths [batch, beam] (int64); each step outputs scores,
predicted_ids and parent_ids [batch, beam]; finalize backtracks the ids with gather_tree.

>>> # decoder = fluid.layers.BeamSearchDecoder(cell, start_token=0, end_token=1, beam_size=4,
>>> #                                          embedding_fn=embed, output_fn=project)
>>> # ids, states = fluid.layers.dynamic_decode(decoder, inits=h0, max_step_num=20)
"""
from __future__ import annotations

import collections
import numbers

import numpy as np

from ..core.unique_name import generate
from ..core.variable import Variable
from ..errors import InvalidArgumentError
from ..ops import beam_search as _ops  # noqa: F401 - defines the ops the builders append
from . import rnn_nest as nest
from .control_flow import While
from .creation import fill_constant_batch_size_like, zeros_like
from .creation import range as arange
from .helper import LayerHelper, check_variable
from .index import gather_nd, gather_tree
from .logic import equal, less_equal, logical_and, logical_not, logical_or
from .manip import expand, shape, stack
from .math_ops import (
    elementwise_add,
    elementwise_floordiv,
    elementwise_mod,
    elementwise_mul,
    increment,
    log,
    reduce_all,
)
from .nn import softmax, topk
from .tensor import assign, cast, fill_constant, reshape, transpose, unsqueeze
from .tensor_array import ARRAY, array_read, array_write, tensor_array_to_tensor

__all__ = ["BeamSearchDecoder", "Decoder", "beam_search", "beam_search_decode", "dynamic_decode"]


class Decoder:
    """The interface dynamic_decode drives: `initialize(inits)` -> (initial inputs, initial
    states, initial finished [batch] bool); `step(time, inputs, states, **kwargs)` ->
    (outputs, next states, next inputs, finished); `finalize(outputs, final_states,
    sequence_lengths)` -> (final outputs, final states), identity by default."""

    def initialize(self, inits):
        raise InvalidArgumentError(
            f"{type(self).__name__} derives from Decoder but does not define initialize(inits)"
            f": define it to return (initial_inputs, initial_states, initial_finished)")

    def step(self, time, inputs, states, **kwargs):
        raise InvalidArgumentError(
            f"{type(self).__name__} derives from Decoder but does not define step(time, "
            f"inputs, states): define it to return (outputs, next_states, next_inputs, "
            f"finished)")

    def finalize(self, outputs, final_states, sequence_lengths):
        return outputs, final_states


class BeamSearchDecoder(Decoder):
    """Beam search over `cell`: each step embeds the previous ids (`embedding_fn`), runs the
    cell on batch * beam rows, projects its output to vocabulary logits (`output_fn`), adds
    log_softmax to each beam's log probability (finished beams may only emit `end_token`, at
    no cost) and keeps the best `beam_size` of beam * vocab candidates. dynamic_decode then
    returns the predicted ids [batch, time, beam] and the final StateWrapper.

    >>> # enc = fluid.layers.BeamSearchDecoder.tile_beam_merge_with_batch(enc, beam_size)
    """

    OutputWrapper = collections.namedtuple("OutputWrapper",
                                           ("scores", "predicted_ids", "parent_ids"))
    StateWrapper = collections.namedtuple("StateWrapper",
                                          ("cell_states", "log_probs", "finished", "lengths"))
    kinf = 1e9

    def __init__(self, cell, start_token, end_token, beam_size, embedding_fn=None,
                 output_fn=None):
        for what, v in (("start_token", start_token), ("end_token", end_token),
                        ("beam_size", beam_size)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise InvalidArgumentError(f"BeamSearchDecoder: {what} must be an int, got {v!r}")
        if beam_size <= 0:
            raise InvalidArgumentError(f"BeamSearchDecoder: beam_size must be positive, got "
                                       f"{beam_size}")
        self.cell, self.embedding_fn, self.output_fn = cell, embedding_fn, output_fn
        self.start_token, self.end_token = int(start_token), int(end_token)
        self.beam_size = int(beam_size)

    @staticmethod
    def tile_beam_merge_with_batch(x, beam_size):
        """x [batch, ...] -> [batch * beam_size, ...], each row repeated beam_size times in a
        row (what the cell sees for the encoder's outputs during beam search)."""
        if not isinstance(x, Variable):
            raise InvalidArgumentError(
                f"tile_beam_merge_with_batch: x must be a Variable, got {x!r}")
        x = unsqueeze(x, [1])
        times = [1] * len(x.shape)
        times[1] = beam_size
        x = expand(x, times)
        rank = len(x.shape)
        x = transpose(x, [*[k + 2 for k in range(rank - 2)], 0, 1])
        x = reshape(x, [0] * (rank - 2) + [-1])
        return transpose(x, [rank - 2, *range(rank - 2)])

    def _split_batch_beams(self, x):
        return reshape(x, [-1, self.beam_size, *x.shape[1:]])

    def _merge_batch_beams(self, x):
        return reshape(x, [-1, *x.shape[2:]])

    def _expand_to_beam_size(self, x):
        x = unsqueeze(x, [1])
        times = [1] * len(x.shape)
        times[1] = self.beam_size
        return expand(x, times)

    def _mask_probs(self, probs, finished):
        # a finished beam's only continuation is end_token, with log probability 0
        finished = cast(finished, probs.dtype)
        ends = elementwise_mul(expand(unsqueeze(finished, [2]), [1, 1, self.vocab_size]),
                               self.noend_mask_tensor, axis=-1)
        return ends - elementwise_mul(probs, finished - 1, axis=0)

    def _gather(self, x, indices, batch_size):
        """x[b, indices[b, k]] for each batch b and beam k."""
        if batch_size.dtype != indices.dtype:
            batch_size = cast(batch_size, indices.dtype)
        batch_size.stop_gradient = True
        batch_pos = expand(unsqueeze(arange(0, batch_size, 1, indices.dtype), [1]),
                           [1, self.beam_size])
        coordinates = stack([batch_pos, indices], axis=2)
        coordinates.stop_gradient = True
        return gather_nd(x, coordinates)

    def initialize(self, initial_cell_states):
        state = nest.flatten(initial_cell_states)[0]
        if not isinstance(state, Variable):
            raise InvalidArgumentError(
                f"BeamSearchDecoder.initialize: the initial cell states must be Variables, got "
                f"{state!r}")
        self.batch_size = shape(state)[0]
        self.start_token_tensor = fill_constant([1], "int64", self.start_token)
        self.end_token_tensor = fill_constant([1], "int64", self.end_token)
        cell_states = nest.map_structure(self._expand_to_beam_size, initial_cell_states)
        inputs = expand(unsqueeze(expand(self.start_token_tensor, [self.batch_size]), [1]),
                        [1, self.beam_size])
        first = np.array([[0.0] + [-self.kinf] * (self.beam_size - 1)], dtype="float32")
        log_probs = expand(assign(first), [self.batch_size, 1])
        finished = fill_constant_batch_size_like(state, [-1, self.beam_size], "bool", False,
                                                 force_cpu=True)
        lengths = zeros_like(inputs)
        inputs = self.embedding_fn(inputs) if self.embedding_fn else inputs
        return inputs, self.StateWrapper(cell_states, log_probs, finished, lengths), finished

    def _beam_search_step(self, time, logits, next_cell_states, beam_state):
        self.vocab_size = logits.shape[-1]
        if self.vocab_size <= 0:
            raise InvalidArgumentError(
                f"BeamSearchDecoder: the logits' last dim (the vocabulary) must be known, got "
                f"shape {list(logits.shape)}; give output_fn a fixed size")
        if not 0 <= self.end_token < self.vocab_size:
            raise InvalidArgumentError(
                f"BeamSearchDecoder: end_token {self.end_token} is outside the vocabulary of "
                f"{self.vocab_size} logits")
        self.vocab_size_tensor = fill_constant([1], "int64", self.vocab_size)
        noend = np.full([self.vocab_size], -self.kinf, dtype="float32")
        noend[self.end_token] = 0
        self.noend_mask_tensor = assign(noend)
        step_log_probs = self._mask_probs(log(softmax(logits)), beam_state.finished)
        log_probs = elementwise_add(step_log_probs, beam_state.log_probs, axis=0)
        scores = reshape(log_probs, [-1, self.beam_size * self.vocab_size])
        topk_scores, topk_indices = topk(scores, k=self.beam_size)
        beam_indices = elementwise_floordiv(topk_indices, self.vocab_size_tensor)
        token_indices = elementwise_mod(topk_indices, self.vocab_size_tensor)
        next_log_probs = self._gather(scores, topk_indices, self.batch_size)
        next_cell_states = nest.map_structure(
            lambda x: self._gather(x, beam_indices, self.batch_size), next_cell_states)
        next_finished = self._gather(beam_state.finished, beam_indices, self.batch_size)
        next_lengths = self._gather(beam_state.lengths, beam_indices, self.batch_size)
        next_lengths = next_lengths + cast(logical_not(next_finished), beam_state.lengths.dtype)
        next_finished = logical_or(next_finished, equal(token_indices, self.end_token_tensor))
        return (self.OutputWrapper(topk_scores, token_indices, beam_indices),
                self.StateWrapper(next_cell_states, next_log_probs, next_finished,
                                  next_lengths))

    def step(self, time, inputs, states, **kwargs):
        inputs = nest.map_structure(self._merge_batch_beams, inputs)
        cell_states = nest.map_structure(self._merge_batch_beams, states.cell_states)
        cell_outputs, next_cell_states = self.cell(inputs, cell_states, **kwargs)
        cell_outputs = nest.map_structure(self._split_batch_beams, cell_outputs)
        next_cell_states = nest.map_structure(self._split_batch_beams, next_cell_states)
        if self.output_fn is not None:
            cell_outputs = self.output_fn(cell_outputs)
        output, state = self._beam_search_step(time, cell_outputs, next_cell_states, states)
        sample_ids = output.predicted_ids
        sample_ids.stop_gradient = True
        next_inputs = self.embedding_fn(sample_ids) if self.embedding_fn else sample_ids
        return output, state, next_inputs, state.finished

    def finalize(self, outputs, final_states, sequence_lengths):
        return gather_tree(outputs.predicted_ids, outputs.parent_ids), final_states


# -- dynamic_decode -----------------------------------------------------------------------------

def _keep_finished(state, new_state, finished):
    """new_state where a sequence is still running, its previous state where it finished."""
    dtype = state.dtype
    if dtype == "bool":
        state, new_state = cast(state, "float32"), cast(new_state, "float32")
    mask = finished
    if mask.dtype != state.dtype:
        mask = cast(mask, state.dtype)
        mask.stop_gradient = True
    out = elementwise_mul(state, mask, axis=0) - elementwise_mul(new_state, mask - 1, axis=0)
    return cast(out, dtype) if dtype == "bool" else out


def _array_outside(body, dtype: str):
    """A tensor array made in the block enclosing the loop body (the loop writes into it)."""
    parent = body.parent_block
    array = parent.create_var(name=generate("dynamic_decode.array"), dtype=dtype, type=ARRAY)
    parent.append_op("create_array", {}, {"Out": [array]}, {"dtype": dtype})
    return array


def _transpose_batch_time(x):
    return transpose(x, [1, 0, *[k + 2 for k in range(len(x.shape) - 2)]])


def dynamic_decode(decoder, inits=None, max_step_num=None, output_time_major=False,
                   impute_finished=False, is_test=False, return_length=False, **kwargs):
    """Run `decoder` from decoder.initialize(inits) one step at a time in a While loop until
    every sequence is finished, or after step `max_step_num` (steps 0..max_step_num run).
    Returns (final_outputs, final_states), plus the sequence lengths with return_length;
    outputs are stacked [batch, time, ...] ([time, batch, ...] with output_time_major) and
    passed through decoder.finalize. `impute_finished` keeps a finished sequence's states
    unchanged. As in fluid 1.8, the steps' inputs and states are kept in tensor arrays
    (written before the loop at step 0, read and written inside it), so a backward pass
    differentiates through every step; `is_test` instead writes them into the decoder's
    initial variables (nothing kept for a backward pass). `kwargs` go to decoder.step.

    >>> # ids, _ = fluid.layers.dynamic_decode(beam_decoder, inits=h0, max_step_num=10)
    """
    if not isinstance(decoder, Decoder):
        raise InvalidArgumentError(
            f"dynamic_decode: decoder must be a fluid.layers.Decoder, got "
            f"{type(decoder).__name__}")
    initial_inputs, initial_states, initial_finished = decoder.initialize(inits)
    global_inputs, global_states, global_finished = (initial_inputs, initial_states,
                                                     initial_finished)
    global_finished.stop_gradient = True
    step_idx = fill_constant([1], "int64", 0)
    cond = logical_not(reduce_all(initial_finished))
    if max_step_num is not None:
        max_step_num = fill_constant([1], "int64", max_step_num)
    loop = While(cond, is_test=is_test)
    sequence_lengths = cast(zeros_like(initial_finished), "int64")
    sequence_lengths.stop_gradient = True
    if is_test:
        inputs, states = initial_inputs, initial_states
    else:
        inputs_arrays = nest.map_structure(lambda x: array_write(x, step_idx), initial_inputs)
        states_arrays = nest.map_structure(lambda x: array_write(x, step_idx), initial_states)

    with loop.block() as body:
        if not is_test:
            inputs = nest.map_structure(lambda a: array_read(a, step_idx), inputs_arrays)
            states = nest.map_structure(lambda a: array_read(a, step_idx), states_arrays)
        outputs, next_states, next_inputs, next_finished = decoder.step(
            step_idx, inputs, states, **kwargs)
        next_finished = logical_or(next_finished, global_finished)
        next_sequence_lengths = elementwise_add(
            sequence_lengths, cast(logical_not(global_finished), sequence_lengths.dtype))
        if impute_finished:
            next_states = nest.map_structure(
                lambda x, y: _keep_finished(x, y, global_finished), states, next_states)
        outputs_arrays = nest.map_structure(lambda x: _array_outside(body, x.dtype), outputs)
        nest.map_structure(lambda x, a: array_write(x, step_idx, array=a), outputs,
                           outputs_arrays)
        increment(step_idx, value=1.0, in_place=True)
        if is_test:
            nest.map_structure(assign, next_inputs, global_inputs)
            nest.map_structure(assign, next_states, global_states)
        else:
            nest.map_structure(lambda x, a: array_write(x, step_idx, array=a), next_inputs,
                               inputs_arrays)
            nest.map_structure(lambda x, a: array_write(x, step_idx, array=a), next_states,
                               states_arrays)
        assign(next_finished, global_finished)
        assign(next_sequence_lengths, sequence_lengths)
        running = logical_not(reduce_all(global_finished))
        if max_step_num is not None:
            logical_and(running, less_equal(step_idx, max_step_num), out=cond)
        else:
            assign(running, cond)

    final_outputs = nest.map_structure(
        lambda a: tensor_array_to_tensor(a, axis=0, use_stack=True)[0], outputs_arrays)
    if is_test:
        final_states = global_states
    else:
        final_states = nest.map_structure(lambda a: array_read(a, step_idx), states_arrays)
    try:
        final_outputs, final_states = decoder.finalize(final_outputs, final_states,
                                                       sequence_lengths)
    except NotImplementedError:  # a decoder written for fluid may say so to skip it
        pass
    if not output_time_major:
        final_outputs = nest.map_structure(_transpose_batch_time, final_outputs)
    if return_length:
        return final_outputs, final_states, sequence_lengths
    return final_outputs, final_states


# -- the beam_search / beam_search_decode ops ------------------------------------------------------

def beam_search(pre_ids, pre_scores, ids, scores, beam_size, end_id, level=0,
                is_accumulated=True, name=None, return_parent_idx=False):
    """One step of beam search on LoD tensors (two levels: sources -> prefixes): for each
    source, the best `beam_size` of its prefixes' candidates (`ids`, or the column index when
    ids is None, scored by `scores`: accumulated log probabilities, or probabilities to add to
    pre_scores in log space when not is_accumulated). Returns (selected_ids,
    selected_scores[, parent_idx]): [n, 1] LoD tensors and each one's prefix row.

    >>> # ids, scores = fluid.layers.beam_search(pre_ids, pre_scores, topk_ids, accu, 4, 1)
    """
    check_variable(pre_ids, "pre_ids", "beam_search", dtypes={"int64"})
    check_variable(pre_scores, "pre_scores", "beam_search", dtypes={"float32", "float64"})
    if ids is not None:
        check_variable(ids, "ids", "beam_search", dtypes={"int64"})
    check_variable(scores, "scores", "beam_search", dtypes={"float32", "float64"})
    helper = LayerHelper("beam_search", name=name)
    selected_scores = helper.create_variable_for_type_inference(pre_scores.dtype,
                                                                stop_gradient=True)
    selected_ids = helper.create_variable_for_type_inference(pre_ids.dtype, stop_gradient=True)
    parent_idx = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    inputs = {"pre_ids": [pre_ids], "pre_scores": [pre_scores], "scores": [scores]}
    if ids is not None:
        inputs["ids"] = [ids]
    helper.append_op("beam_search", inputs,
                     {"selected_ids": [selected_ids], "selected_scores": [selected_scores],
                      "parent_idx": [parent_idx]},
                     {"level": int(level), "beam_size": int(beam_size), "end_id": int(end_id),
                      "is_accumulated": bool(is_accumulated)})
    if return_parent_idx:
        return selected_ids, selected_scores, parent_idx
    return selected_ids, selected_scores


def beam_search_decode(ids, scores, beam_size, end_id, name=None):
    """The sentences a loop of beam_search steps found, from the tensor arrays of each step's
    selected ids and scores: 1-D LoD tensors (sentence_ids, sentence_scores), level 0 the
    sentences of each source (best final score first), level 1 the words of each.

    >>> # sent_ids, sent_scores = fluid.layers.beam_search_decode(ids_arr, scores_arr, 4, 1)
    """
    for what, v, dtypes in (("ids", ids, {"int64"}), ("scores", scores, {"float32"})):
        check_variable(v, what, "beam_search_decode", dtypes=dtypes)
        if v.type != ARRAY:
            raise InvalidArgumentError(
                f"beam_search_decode: {what} ({v.name}) must be a tensor array (the array a "
                f"loop wrote each step's beam_search output into with array_write), got a "
                f"{v.type}")
    helper = LayerHelper("beam_search_decode", name=name)
    sentence_ids = helper.create_variable_for_type_inference(ids.dtype, stop_gradient=True)
    sentence_scores = helper.create_variable_for_type_inference(scores.dtype,
                                                                stop_gradient=True)
    helper.append_op("beam_search_decode", {"Ids": [ids], "Scores": [scores]},
                     {"SentenceIds": [sentence_ids], "SentenceScores": [sentence_scores]},
                     {"beam_size": int(beam_size), "end_id": int(end_id)})
    return sentence_ids, sentence_scores
