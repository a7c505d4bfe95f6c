"""fluid.layers' CTC builders: warpctc (the CTC loss), ctc_greedy_decoder (best path: top-1
class per step, then ctc_align) and edit_distance (fluid 1.8's ops of those names; the math is
in spmd/ops/ctc.py). Each takes LoD sequences, or padded ones with their lengths, as fluid 1.8.

>>> # loss = fluid.layers.warpctc(logits, label, blank=0)          # LoD logits and labels
>>> # decoded = fluid.layers.ctc_greedy_decoder(probs, blank=0)
>>> # distance, count = fluid.layers.edit_distance(decoded, label)
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .nn import topk
from .tensor import squeeze

__all__ = ["ctc_greedy_decoder", "edit_distance", "warpctc"]

_FLOATS = {"float32", "float64"}
_INTS = {"int32", "int64"}


def _int(value, arg: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"{where}: {arg} must be an int, got {value!r}")
    return int(value)


def warpctc(input, label, blank=0, norm_by_times=False, input_length=None,
            label_length=None):
    """The CTC loss of each sequence [N, 1]: -log p(label | input), softmax over the classes
    taken inside (`input` holds unnormalized scores, num_classes + 1 wide with the blank).
    LoD form: input [T, C] and label [L, 1] int32 with LoD. Padded form: time-major input
    [T_max, N, C], label [N, L_max] int32, input_length and label_length [N] int64.
    norm_by_times divides each sequence's gradient (not its loss) by its length.

    >>> # cost = fluid.layers.warpctc(fc_out, label, blank=num_classes)
    >>> # avg_cost = fluid.layers.mean(cost)
    """
    where = "warpctc"
    check_variable(input, "input", where, dtypes=_FLOATS)
    check_variable(label, "label", where, dtypes=_INTS)
    helper = LayerHelper("warpctc")
    inputs = {"Logits": [input], "Label": [label]}
    if (input_length is None) != (label_length is None):
        raise InvalidArgumentError(
            f"{where}: give both input_length and label_length (padded input) or neither "
            f"(LoD input)")
    if input_length is not None:
        check_variable(input_length, "input_length", where, dtypes={"int64"})
        check_variable(label_length, "label_length", where, dtypes={"int64"})
        inputs["LogitsLength"], inputs["LabelLength"] = [input_length], [label_length]
    loss = helper.create_variable_for_type_inference(input.dtype)
    grad = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("warpctc", inputs, {"WarpCTCGrad": [grad], "Loss": [loss]},
                     {"blank": _int(blank, "blank", where),
                      "norm_by_times": bool(norm_by_times)})
    return loss


def ctc_greedy_decoder(input, blank, input_length=None, padding_value=0, name=None):
    """Best-path CTC decoding: the top class of each step, repeated classes merged, blanks
    dropped. LoD form: input [T, C] -> int64 [M, 1] with the decoded LoD (a batch whose every
    sequence decodes to nothing gives one -1 row, as fluid). Padded form: input [N, T, C] with
    input_length [N, 1] -> (decoded [N, T] padded with padding_value, lengths [N, 1]).

    >>> # decoded = fluid.layers.ctc_greedy_decoder(fluid.layers.softmax(fc_out), blank=0)
    """
    where = "ctc_greedy_decoder"
    check_variable(input, "input", where, dtypes=_FLOATS)
    helper = LayerHelper("ctc_greedy_decoder", name=name)
    _, indices = topk(input, k=1)
    attrs = {"merge_repeated": True, "blank": _int(blank, "blank", where)}
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    if input_length is None:
        helper.append_op("ctc_align", {"Input": [indices]}, {"Output": [out]}, attrs)
        return out
    check_variable(input_length, "input_length", where, dtypes=_INTS)
    if input.ndim != 3:
        raise InvalidArgumentError(
            f"{where}: with input_length the input must be padded [batch, max time, classes],"
            f" got {list(input.shape)} ({input.name})")
    out_len = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    attrs["padding_value"] = _int(padding_value, "padding_value", where)
    helper.append_op("ctc_align", {"Input": [squeeze(indices, [2])],
                                   "InputLength": [input_length]},
                     {"Output": [out], "OutputLength": [out_len]}, attrs)
    return out, out_len


def edit_distance(input, label, normalized=True, ignored_tokens=None, input_length=None,
                  label_length=None):
    """The Levenshtein distance of each hypothesis in `input` to its reference in `label`
    (int64 tokens; LoD [T, 1], or padded [N, T] with input_length / label_length [N]),
    divided by the reference length when normalized; ignored_tokens are erased from both
    first (sequence_erase, LoD form). Returns (distance [N, 1] float32, sequence count [1]).

    >>> # distance, seq_num = fluid.layers.edit_distance(decoded, label, normalized=False)
    """
    where = "edit_distance"
    check_variable(input, "input", where, dtypes={"int64"})
    check_variable(label, "label", where, dtypes={"int64"})
    helper = LayerHelper("edit_distance")
    if ignored_tokens:
        tokens = [_int(t, "ignored_tokens entry", where) for t in ignored_tokens]
        erased = []
        for v in (input, label):
            out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
            helper.append_op("sequence_erase", {"X": [v]}, {"Out": [out]}, {"tokens": tokens})
            erased.append(out)
        input, label = erased
    inputs = {"Hyps": [input], "Refs": [label]}
    if input_length is not None and label_length is not None:
        for arg, v in (("input_length", input_length), ("label_length", label_length)):
            check_variable(v, arg, where, dtypes={"int64"})
        inputs["HypsLength"], inputs["RefsLength"] = [input_length], [label_length]
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    seq_num = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("edit_distance", inputs, {"Out": [out], "SequenceNum": [seq_num]},
                     {"normalized": bool(normalized)})
    return out, seq_num
