"""fluid 1.8's decoding helpers (python/paddle/fluid/layers/rnn.py): BasicDecoder, a Decoder
that runs a cell and lets a DecodeHelper pick each step's ids and next inputs, with
TrainingHelper (teacher forcing from given target inputs), GreedyEmbeddingHelper (argmax ids,
embedded as the next inputs) and SampleEmbeddingHelper (ids sampled from the softmax).

>>> # helper = fluid.layers.TrainingHelper(trg_emb, trg_length)
>>> # decoder = fluid.layers.BasicDecoder(cell, helper, output_fn=project)
>>> # (logits, ids), _ = fluid.layers.dynamic_decode(decoder, inits=h0)
"""
from __future__ import annotations

import collections

from ..core.variable import Variable
from ..errors import InvalidArgumentError
from . import rnn_nest as nest
from .creation import argmax, fill_constant_batch_size_like
from .decode import Decoder
from .logic import equal, less_equal
from .manip import pad
from .nn import softmax
from .random import sampling_id
from .tensor import cast, fill_constant, squeeze
from .tensor import slice as slice_

__all__ = ["BasicDecoder", "DecodeHelper", "GreedyEmbeddingHelper", "SampleEmbeddingHelper",
           "TrainingHelper"]


class DecodeHelper:
    """How BasicDecoder starts and goes on: `initialize()` -> (initial inputs, initial
    finished); `sample(time, outputs, states)` -> the step's ids; `next_inputs(time,
    outputs, states, sample_ids)` -> (finished, next inputs, next states)."""

    def initialize(self):
        raise InvalidArgumentError(
            f"{type(self).__name__} derives from DecodeHelper but does not define "
            f"initialize(): define it to return (initial_inputs, initial_finished)")

    def sample(self, time, outputs, states):
        raise InvalidArgumentError(
            f"{type(self).__name__} derives from DecodeHelper but does not define "
            f"sample(time, outputs, states)")

    def next_inputs(self, time, outputs, states, sample_ids):
        raise InvalidArgumentError(
            f"{type(self).__name__} derives from DecodeHelper but does not define "
            f"next_inputs(time, outputs, states, sample_ids)")


def _check_var(value, what: str, where: str) -> Variable:
    if not isinstance(value, Variable):
        raise InvalidArgumentError(f"{where}: {what} must be a Variable, got {value!r}")
    return value


class TrainingHelper(DecodeHelper):
    """Teacher forcing: step t's input is step t of `inputs` ([batch, time, ...], or [time,
    batch, ...] with time_major); a sequence finishes after `sequence_length` steps; the
    sampled ids are the argmax of the outputs.

    >>> # helper = fluid.layers.TrainingHelper(trg_emb, trg_length)
    """

    def __init__(self, inputs, sequence_length, time_major=False):
        for x in nest.flatten(inputs):
            _check_var(x, "every input", "TrainingHelper")
        self.inputs = inputs
        self.sequence_length = _check_var(sequence_length, "sequence_length", "TrainingHelper")
        self.time_major = time_major
        # one step of padding at the end, so that reading step t + 1 at the last step stays in
        # range (fluid's way, instead of a condition)
        self.inputs_ = nest.map_structure(
            lambda x: pad(x, [0, 1] + [0, 0] * (len(x.shape) - 1) if time_major
                          else [0, 0, 0, 1] + [0, 0] * (len(x.shape) - 2)), inputs)

    def initialize(self):
        zero = fill_constant([1], self.sequence_length.dtype, 0)
        finished = equal(self.sequence_length, zero)
        axis = 0 if self.time_major else 1
        first = nest.map_structure(
            lambda x: squeeze(slice_(x, axes=[axis], starts=[0], ends=[1]), [axis]),
            self.inputs)
        return first, finished

    def sample(self, time, outputs, states):
        return argmax(outputs, axis=-1)

    def next_inputs(self, time, outputs, states, sample_ids):
        if time.dtype != "int32":
            time = cast(time, "int32")
        if self.sequence_length.dtype != time.dtype:
            self.sequence_length = cast(self.sequence_length, time.dtype)
        next_time = time + 1
        finished = less_equal(self.sequence_length, next_time)
        axis = 0 if self.time_major else 1
        nexts = nest.map_structure(
            lambda x: squeeze(slice_(x, axes=[axis], starts=[next_time], ends=[next_time + 1]),
                              [axis]), self.inputs_)
        return finished, nexts, states


class GreedyEmbeddingHelper(DecodeHelper):
    """Greedy decoding: the step's ids are the argmax of the outputs, embedded by
    `embedding_fn` as the next inputs; a sequence finishes on `end_token`. Starts from
    `start_tokens` ([batch] int64).

    >>> # helper = fluid.layers.GreedyEmbeddingHelper(embed, start_tokens, end_token=1)
    """

    def __init__(self, embedding_fn, start_tokens, end_token):
        if not callable(embedding_fn):
            raise InvalidArgumentError(
                f"{type(self).__name__}: embedding_fn must be callable, got {embedding_fn!r}")
        self.embedding_fn = embedding_fn
        self.start_tokens = _check_var(start_tokens, "start_tokens", type(self).__name__)
        self.end_token = fill_constant([1], "int64", end_token)

    def initialize(self):
        finished = fill_constant_batch_size_like(self.start_tokens, [-1], "bool", False,
                                                 force_cpu=True)
        return self.embedding_fn(self.start_tokens), finished

    def sample(self, time, outputs, states):
        return argmax(outputs, axis=-1)

    def next_inputs(self, time, outputs, states, sample_ids):
        finished = equal(sample_ids, self.end_token)
        return finished, self.embedding_fn(sample_ids), states


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """GreedyEmbeddingHelper with the ids drawn from softmax(outputs / softmax_temperature)
    (sampling_id, with `seed`) instead of the argmax.

    >>> # helper = fluid.layers.SampleEmbeddingHelper(embed, start, 1, softmax_temperature=0.5)
    """

    def __init__(self, embedding_fn, start_tokens, end_token, softmax_temperature=None,
                 seed=None):
        super().__init__(embedding_fn, start_tokens, end_token)
        self.softmax_temperature = (fill_constant([1], "float32", softmax_temperature)
                                    if softmax_temperature is not None else None)
        self.seed = seed

    def sample(self, time, outputs, states):
        logits = outputs / self.softmax_temperature if self.softmax_temperature is not None \
            else outputs
        probs = softmax(logits)
        probs.stop_gradient = True  # sampling has no gradient
        return sampling_id(probs, seed=self.seed or 0, dtype=self.start_tokens.dtype)


class BasicDecoder(Decoder):
    """Each step: the cell on the inputs, `output_fn` on its outputs, then the helper's ids,
    next inputs and finished flags. dynamic_decode returns OutputWrapper(cell_outputs,
    sample_ids) stacked over the steps.

    >>> # decoder = fluid.layers.BasicDecoder(cell, helper, output_fn=project)
    """

    OutputWrapper = collections.namedtuple("OutputWrapper", ("cell_outputs", "sample_ids"))

    def __init__(self, cell, helper, output_fn=None):
        if not isinstance(helper, DecodeHelper):
            raise InvalidArgumentError(
                f"BasicDecoder: helper must be a fluid.layers.DecodeHelper (TrainingHelper, "
                f"GreedyEmbeddingHelper, ...), got {type(helper).__name__}")
        self.cell, self.helper, self.output_fn = cell, helper, output_fn

    def initialize(self, initial_cell_states):
        inputs, finished = self.helper.initialize()
        return inputs, initial_cell_states, finished

    def step(self, time, inputs, states, **kwargs):
        cell_outputs, cell_states = self.cell(inputs, states, **kwargs)
        if self.output_fn is not None:
            cell_outputs = self.output_fn(cell_outputs)
        sample_ids = self.helper.sample(time=time, outputs=cell_outputs, states=cell_states)
        sample_ids.stop_gradient = True
        finished, next_inputs, next_states = self.helper.next_inputs(
            time=time, outputs=cell_outputs, states=cell_states, sample_ids=sample_ids)
        return (self.OutputWrapper(cell_outputs, sample_ids), next_states, next_inputs,
                finished)
