"""fluid.layers' linear-chain CRF and chunk evaluation: linear_chain_crf, crf_decoding and
chunk_eval (fluid 1.8's ops of the same names; spmd/ops/crf.py has the math).

linear_chain_crf creates the transition parameter [tags + 2, tags] (`linear_chain_crf_<n>.w_0`
unless param_attr names it); crf_decoding reads that parameter by name, so a tagger shares it
by giving both the same ParamAttr(name=...).

>>> # crf_cost = fluid.layers.linear_chain_crf(emission, label, fluid.ParamAttr(name="crfw"))
>>> # path = fluid.layers.crf_decoding(emission, fluid.ParamAttr(name="crfw"))
>>> # precision, recall, f1, *counts = fluid.layers.chunk_eval(path, label, "IOB", 3)
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from ..ops.crf import CHUNK_SCHEMES
from .helper import LayerHelper, check_variable
from .param_attr import ParamAttr

__all__ = ["chunk_eval", "crf_decoding", "linear_chain_crf"]

_FLOATS = {"float32", "float64"}


def _emission_inputs(input, label, length, where: str, label_required: bool) -> dict:
    check_variable(input, "input", where, dtypes=_FLOATS)
    inputs = {"Emission": [input]}
    if label is not None or label_required:
        check_variable(label, "label", where, dtypes={"int64"})
        inputs["Label"] = [label]
    if length is not None:
        check_variable(length, "length", where, dtypes={"int64"})
        if input.ndim != 3:
            raise InvalidArgumentError(
                f"{where}: with length= the input must be padded [batch, max length, tags], "
                f"got {list(input.shape)} ({input.name})")
        inputs["Length"] = [length]
    elif input.ndim != 2:
        raise InvalidArgumentError(
            f"{where}: input ({input.name}) must be [total steps, tags] with LoD, or padded "
            f"[batch, max length, tags] with length=; got {list(input.shape)}")
    return inputs


def linear_chain_crf(input, label, param_attr=None, length=None):
    """The negative log-likelihood of `label` under a linear-chain CRF over the emission
    scores `input`, one value per sequence [N, 1] (minimize its mean). LoD form: input [T, D]
    and label [T, 1] int64 with LoD; padded form: input [N, T, D], label [N, T] (or
    [N, T, 1]) and length [N] int64. Creates the transition parameter [D + 2, D]: start
    weights, end weights, then tag-to-tag weights.

    >>> # cost = fluid.layers.linear_chain_crf(emission, label, fluid.ParamAttr(name="crfw"))
    >>> # avg_cost = fluid.layers.mean(cost)
    """
    where = "linear_chain_crf"
    inputs = _emission_inputs(input, label, length, where, label_required=True)
    size = input.shape[-1]
    if size <= 0:
        raise InvalidArgumentError(
            f"{where}: input's last dim (the number of tags) must be known, got "
            f"{list(input.shape)}")
    helper = LayerHelper("linear_chain_crf", param_attr=param_attr)
    dtype = input.dtype
    transition = helper.create_parameter(helper.param_attr, [size + 2, size], dtype)
    inputs["Transition"] = [transition]
    outs = {slot: helper.create_variable_for_type_inference(dtype)
            for slot in ("Alpha", "EmissionExps", "TransitionExps", "LogLikelihood")}
    helper.append_op("linear_chain_crf", inputs, {k: [v] for k, v in outs.items()})
    return outs["LogLikelihood"]


def crf_decoding(input, param_attr, label=None, length=None):
    """The Viterbi tag path of each sequence of `input` under the transition parameter named
    by `param_attr` (the one linear_chain_crf created): int64 [T, 1] with input's LoD, or
    [N, T] (0 on padding) with length=. Given `label`, 1 where the path agrees with it, else 0.

    >>> # path = fluid.layers.crf_decoding(emission, fluid.ParamAttr(name="crfw"))
    """
    where = "crf_decoding"
    inputs = _emission_inputs(input, label, length, where, label_required=False)
    name = param_attr.name if isinstance(param_attr, ParamAttr) else param_attr
    if not isinstance(name, str):
        raise InvalidArgumentError(
            f"{where}: param_attr must name the transition parameter linear_chain_crf "
            f"created (fluid.ParamAttr(name=...) or its name), got {param_attr!r}")
    helper = LayerHelper("crf_decoding")
    transition = helper.main_program.global_block().vars.get(name)
    if transition is None:
        raise InvalidArgumentError(
            f"{where}: no parameter named '{name}' in the program; build linear_chain_crf "
            f"with param_attr=fluid.ParamAttr(name='{name}') first (or pass its name)")
    inputs["Transition"] = [transition]
    path = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("crf_decoding", inputs, {"ViterbiPath": [path]})
    return path


def chunk_eval(input, label, chunk_scheme, num_chunk_types, excluded_chunk_types=None,
               seq_length=None):
    """Chunk precision, recall and F1 of the int64 tags `input` against `label` under
    chunk_scheme 'IOB', 'IOE', 'IOBES' or 'plain' with num_chunk_types chunk types; tags
    are type * tag types + tag, and num_chunk_types * tag types is 'outside'. LoD tags [T, 1],
    or padded [N, T] with seq_length [N]. Returns (precision, recall, f1_score,
    num_infer_chunks, num_label_chunks, num_correct_chunks); the counts feed
    fluid.metrics.ChunkEvaluator.

    >>> # p, r, f1, n_infer, n_label, n_correct = fluid.layers.chunk_eval(
    >>> #     path, label, chunk_scheme="IOB", num_chunk_types=3)
    """
    where = "chunk_eval"
    check_variable(input, "input", where, dtypes={"int64"})
    check_variable(label, "label", where, dtypes={"int64"})
    if chunk_scheme not in CHUNK_SCHEMES:
        raise InvalidArgumentError(
            f"{where}: chunk_scheme must be one of {sorted(CHUNK_SCHEMES)}, got "
            f"{chunk_scheme!r}")
    if isinstance(num_chunk_types, bool) or not isinstance(num_chunk_types,
                                                           numbers.Integral) \
            or num_chunk_types <= 0:
        raise InvalidArgumentError(
            f"{where}: num_chunk_types must be a positive int, got {num_chunk_types!r}")
    helper = LayerHelper("chunk_eval")
    inputs = {"Inference": [input], "Label": [label]}
    if seq_length is not None:
        check_variable(seq_length, "seq_length", where, dtypes={"int64"})
        inputs["SeqLength"] = [seq_length]
    slots = ("Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks",
             "NumCorrectChunks")
    outs = [helper.create_variable_for_type_inference("float32" if i < 3 else "int64",
                                                      stop_gradient=True)
            for i in range(6)]
    helper.append_op("chunk_eval", inputs, {s: [v] for s, v in zip(slots, outs)},
                     {"num_chunk_types": int(num_chunk_types), "chunk_scheme": chunk_scheme,
                      "excluded_chunk_types": list(excluded_chunk_types or [])})
    return tuple(outs)
