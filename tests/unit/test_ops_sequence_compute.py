"""The sequence ops that compute over sequences (sequence_conv, row_conv, sequence_softmax,
sequence_expand, sequence_expand_as, im2sequence) against numpy references written with
plain loops, and their gradients against central finite differences (float64); empty
sequences and two-level LoD included where the op takes them."""
from __future__ import annotations

import numpy as np
import pytest

from tests.op_harness import OpCase, check_op, rand


def _offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(int)


def _spans(lengths):
    off = _offsets(lengths)
    return list(zip(off[:-1], off[1:]))


# -- sequence_conv ------------------------------------------------------------------------------

def _conv_ref(X, Filter, lod, contextLength, contextStart=0, **_):
    d = X.shape[1]
    out = np.zeros((X.shape[0], Filter.shape[1]))
    for a, b in _spans(lod["X"][-1]):
        for t in range(a, b):
            col = np.zeros(contextLength * d)
            for j in range(contextLength):
                s = t + contextStart + j
                if a <= s < b:
                    col[j * d:(j + 1) * d] = X[s]
            out[t] = col @ Filter
    return {"Out": out}


CONV_CASES = [
    OpCase("sequence_conv", {"X": rand(7, 3), "Filter": rand(9, 2)}, _conv_ref,
           {"contextLength": 3, "contextStart": -1}, lod={"X": [[2, 0, 1, 4]]},
           out_lod={"Out": [[2, 0, 1, 4]]}, name="conv_centred_empty_sequence"),
    OpCase("sequence_conv", {"X": rand(6, 2), "Filter": rand(8, 3)}, _conv_ref,
           {"contextLength": 4, "contextStart": 0}, lod={"X": [[5, 1]]}, name="conv_start0"),
    OpCase("sequence_conv", {"X": rand(5, 2), "Filter": rand(4, 2)}, _conv_ref,
           {"contextLength": 2, "contextStart": 1}, lod={"X": [[3, 2]]}, name="conv_start1"),
    OpCase("sequence_conv", {"X": rand(4, 1), "Filter": rand(5, 2)}, _conv_ref,
           {"contextLength": 5, "contextStart": -3}, lod={"X": [[1, 3]]},
           name="conv_window_longer_than_sequences"),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_sequence_conv(case):
    check_op(case)


# -- row_conv ----------------------------------------------------------------------------------

def _row_conv_ref(X, Filter, lod=None, **_):
    rows = X.reshape(-1, X.shape[-1])
    if lod:
        spans = _spans(lod["X"][-1])
    else:
        t = X.shape[1]
        spans = [(i * t, (i + 1) * t) for i in range(X.shape[0])]
    out = np.zeros_like(rows)
    for a, b in spans:
        for t in range(a, b):
            for j in range(Filter.shape[0]):
                if t + j < b:
                    out[t] += rows[t + j] * Filter[j]
    return {"Out": out.reshape(X.shape)}


ROW_CONV_CASES = [
    OpCase("row_conv", {"X": rand(8, 3), "Filter": rand(3, 3)}, _row_conv_ref,
           lod={"X": [[3, 1, 4]]}, out_lod={"Out": [[3, 1, 4]]}, name="row_conv_lod"),
    OpCase("row_conv", {"X": rand(5, 2), "Filter": rand(2, 2)}, _row_conv_ref,
           lod={"X": [[2, 0, 3]]}, name="row_conv_empty_sequence"),
    OpCase("row_conv", {"X": rand(2, 4, 3), "Filter": rand(3, 3)}, _row_conv_ref,
           name="row_conv_tensor_without_lod"),
]


@pytest.mark.parametrize("case", ROW_CONV_CASES, ids=str)
def test_row_conv(case):
    check_op(case)


# -- sequence_softmax --------------------------------------------------------------------------

def _softmax_ref(X, lod, **_):
    flat = X.reshape(-1)
    out = np.zeros_like(flat)
    for a, b in _spans(lod["X"][-1]):
        e = np.exp(flat[a:b] - flat[a:b].max()) if b > a else flat[a:b]
        out[a:b] = e / e.sum() if b > a else e
    return {"Out": out.reshape(X.shape)}


SOFTMAX_CASES = [
    OpCase("sequence_softmax", {"X": rand(8)}, _softmax_ref, lod={"X": [[3, 0, 1, 4]]},
           out_lod={"Out": [[3, 0, 1, 4]]}, name="softmax_flat_empty_sequence"),
    OpCase("sequence_softmax", {"X": rand(6, 1, low=-5, high=5)}, _softmax_ref,
           lod={"X": [[4, 2]]}, name="softmax_column"),
    OpCase("sequence_softmax", {"X": rand(8)}, _softmax_ref, lod={"X": [[2, 1], [2, 3, 3]]},
           out_lod={"Out": [[2, 1], [2, 3, 3]]}, name="softmax_two_levels_last_level"),
]


@pytest.mark.parametrize("case", SOFTMAX_CASES, ids=str)
def test_sequence_softmax(case):
    check_op(case)


# -- sequence_expand / sequence_expand_as ------------------------------------------------------

def _expand_ref(X, Y, lod, ref_level=-1, **_):
    y_lod = lod["Y"]
    ref = y_lod[ref_level if ref_level != -1 else len(y_lod) - 1]
    if "X" not in lod:
        return {"Out": np.concatenate([np.repeat(X[i:i + 1], n, axis=0)
                                       for i, n in enumerate(ref)])}
    seqs = [X[a:b] for a, b in _spans(lod["X"][0])]
    parts = [seqs[i] for i, n in enumerate(ref) for _ in range(n)]
    return {"Out": np.concatenate(parts) if parts else np.zeros((0,) + X.shape[1:])}


EXPAND_CASES = [
    OpCase("sequence_expand", {"X": rand(3, 2), "Y": rand(5, 1)}, _expand_ref,
           lod={"Y": [[2, 0, 3]]}, name="expand_rows"),
    OpCase("sequence_expand", {"X": rand(5, 2), "Y": rand(4, 1)}, _expand_ref,
           lod={"X": [[2, 3]], "Y": [[1, 3]]}, out_lod={"Out": [[2, 3, 3, 3]]},
           name="expand_sequences"),
    OpCase("sequence_expand", {"X": rand(5, 2), "Y": rand(3, 1)}, _expand_ref,
           lod={"X": [[2, 0, 3]], "Y": [[1, 2, 0]]}, out_lod={"Out": [[2, 0, 0]]},
           name="expand_empty_sequence_and_zero_repeats"),
    OpCase("sequence_expand", {"X": rand(5, 2), "Y": rand(3, 1)}, _expand_ref,
           {"ref_level": 0}, lod={"X": [[2, 3]], "Y": [[2, 1], [1, 1, 1]]},
           out_lod={"Out": [[2, 2, 3]]}, name="expand_by_level0_of_two"),
    OpCase("sequence_expand", {"X": rand(3, 3), "Y": rand(6, 1)}, _expand_ref,
           {"ref_level": 1}, lod={"Y": [[2, 1], [1, 2, 3]]}, name="expand_rows_by_level1"),
]


def _expand_as_ref(X, Y, lod, **_):
    return {"Out": np.repeat(X, lod["Y"][0], axis=0)}


EXPAND_AS_CASES = [
    OpCase("sequence_expand_as", {"X": rand(3, 2), "Y": rand(5, 1)}, _expand_as_ref,
           lod={"Y": [[2, 0, 3]]}, out_lod={"Out": [[2, 0, 3]]}, name="expand_as_rows"),
    OpCase("sequence_expand_as", {"X": rand(2, 2, 2), "Y": rand(4, 1)}, _expand_as_ref,
           lod={"X": [[1, 1]], "Y": [[1, 3]]}, out_lod={"Out": [[1, 3]]},
           name="expand_as_ignores_x_lod"),
]


@pytest.mark.parametrize("case", EXPAND_CASES + EXPAND_AS_CASES, ids=str)
def test_sequence_expand(case):
    check_op(case)


# -- im2sequence -------------------------------------------------------------------------------

def _im2seq_ref(X, kernels, strides=(1, 1), paddings=(0, 0, 0, 0), Y=None, out_stride=(1, 1),
                **_):
    n, c, h, w = X.shape
    kh, kw = kernels
    up, left, down, right = paddings
    xp = np.pad(X, ((0, 0), (0, 0), (up, down), (left, right)))
    oh = (h + up + down - kh) // strides[0] + 1
    ow = (w + left + right - kw) // strides[1] + 1
    rows = []
    for i in range(n):
        ih, iw = oh, ow
        if Y is not None and n > 1:
            rh = -(-int(Y[i, 0]) // out_stride[0])
            rw = -(-int(Y[i, 1]) // out_stride[1])
            ih = (rh + up + down - kh) // strides[0] + 1
            iw = (rw + left + right - kw) // strides[1] + 1
        for y in range(ih):
            for x in range(iw):
                patch = xp[i, :, y * strides[0]:y * strides[0] + kh,
                           x * strides[1]:x * strides[1] + kw]
                rows.append(patch.reshape(-1))
    return {"Out": np.stack(rows)}


IM2SEQ_CASES = [
    OpCase("im2sequence", {"X": rand(2, 2, 3, 3)}, _im2seq_ref, {"kernels": [2, 2]},
           out_lod={"Out": [[4, 4]]}, name="im2seq_basic"),
    OpCase("im2sequence", {"X": rand(1, 1, 4, 5)}, _im2seq_ref,
           {"kernels": [2, 3], "strides": [2, 1], "paddings": [1, 0, 1, 1]},
           out_lod={"Out": [[12]]}, name="im2seq_stride_padding"),
    OpCase("im2sequence", {"X": rand(2, 1, 4, 4), "Y": np.array([[4.0, 4.0], [3.0, 2.0]])},
           _im2seq_ref, {"kernels": [2, 2], "strides": [2, 2], "out_stride": [1, 1]},
           out_lod={"Out": [[4, 1]]}, name="im2seq_real_image_sizes"),
    OpCase("im2sequence", {"X": rand(2, 1, 5, 5), "Y": np.array([[9.0, 10.0], [5.0, 3.0]])},
           _im2seq_ref, {"kernels": [2, 2], "strides": [1, 1], "out_stride": [2, 2]},
           out_lod={"Out": [[16, 2]]}, name="im2seq_real_sizes_out_stride"),
]


@pytest.mark.parametrize("case", IM2SEQ_CASES, ids=str)
def test_im2sequence(case):
    check_op(case)
