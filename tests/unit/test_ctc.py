"""warpctc, ctc_align, edit_distance and sequence_erase against numpy references: CTC by brute
force over every alignment (sum of the probabilities of the step paths that collapse to the
label), with repeated labels, an empty label, a label too long for its logits (loss 0, as
fluid), LoD and padded (time-major) forms, and its gradient against central finite
differences (float64) and norm_by_times's scaling; ctc_align and edit_distance in both forms;
the layers ctc_greedy_decoder and edit_distance (ignored_tokens) built and run."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import spmd.fluid as fluid
from tests.op_harness import OpCase, check_op, rand, run_forward

RNG = np.random.default_rng(11)


def _collapse(path, blank):
    out = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
    return [k for k in out if k != blank]


def ctc_loss_ref(logits, label, blank):
    if len(logits) == 0:
        return 0.0
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    total = sum(np.prod([p[t, k] for t, k in enumerate(path)])
                for path in itertools.product(range(logits.shape[1]), repeat=len(logits))
                if _collapse(list(path), blank) == list(label))
    return -np.log(total) if total > 0 else 0.0


def _ctc_split(Logits, Label, lod, LogitsLength, LabelLength):
    if LogitsLength is None:
        xo = np.concatenate([[0], np.cumsum(lod["Logits"][-1])]).astype(int)
        yo = np.concatenate([[0], np.cumsum(lod["Label"][-1])]).astype(int)
        return [(Logits[a:b], Label.reshape(-1)[c:d]) for a, b, c, d in
                zip(xo[:-1], xo[1:], yo[:-1], yo[1:])]
    return [(Logits[:t, i], Label[i, :k]) for i, (t, k) in
            enumerate(zip(LogitsLength.reshape(-1), LabelLength.reshape(-1)))]


def warpctc_ref(Logits, Label, lod=None, LogitsLength=None, LabelLength=None, blank=0,
                norm_by_times=False):
    loss = [ctc_loss_ref(x, y, blank) for x, y in
            _ctc_split(Logits, Label, lod, LogitsLength, LabelLength)]
    return {"Loss": np.array(loss).reshape(-1, 1)}


def _ctc_case(name, lengths, labels, c=4, blank=0, padded=False, **attrs):
    logits = rand(sum(lengths), c, low=-2, high=2)
    flat = np.array([k for lab in labels for k in lab], np.int32).reshape(-1, 1)
    kw = {"outputs": {"WarpCTCGrad": 1, "Loss": 1}, "grad_outputs": ["Loss"], "name": name,
          "attrs": {"blank": blank, **attrs}}
    if not padded:
        return OpCase("warpctc", {"Logits": logits, "Label": flat}, warpctc_ref,
                      lod={"Logits": [lengths], "Label": [[len(lab) for lab in labels]]}, **kw)
    t, n, lmax = max(lengths), len(lengths), max(len(lab) for lab in labels)
    px, py = np.zeros((t, n, c)), np.zeros((n, lmax), np.int32)
    off = 0
    for i, (k, lab) in enumerate(zip(lengths, labels)):
        px[:k, i], py[i, :len(lab)] = logits[off:off + k], lab
        off += k
    return OpCase("warpctc", {"Logits": px, "Label": py,
                              "LogitsLength": np.array(lengths, np.int64),
                              "LabelLength": np.array([len(lab) for lab in labels], np.int64)},
                  warpctc_ref, **kw)


CTC_CASES = [
    _ctc_case("ctc_lod", [4, 3], [[1, 2], [3]]),
    _ctc_case("ctc_repeats_and_empty_label", [4, 2, 3], [[2, 2], [], [1]], c=3),
    _ctc_case("ctc_label_too_long", [2, 4], [[1, 1], [2, 3]]),
    _ctc_case("ctc_blank_last", [3, 4], [[0, 1], [2]], c=4, blank=3),
    _ctc_case("ctc_padded", [4, 2, 3], [[1, 3], [2], [1, 2]], padded=True),
]


@pytest.mark.parametrize("case", CTC_CASES, ids=str)
def test_warpctc(case):
    check_op(case)


def _ctc_grads(case, norm):
    case.attrs["norm_by_times"] = norm
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        x = fluid.data("x", [-1, 4], "float64", lod_level=1)
        x.stop_gradient = False
        y = fluid.data("y", [-1, 1], "int32", lod_level=1)
        loss = fluid.layers.warpctc(x, y, norm_by_times=norm)
        (g,) = fluid.gradients([fluid.layers.reduce_sum(loss * 3.0)], [x])
    place = fluid.CPUPlace()
    feed = {"x": fluid.create_lod_tensor(case.inputs["Logits"], case.lod["Logits"], place),
            "y": fluid.create_lod_tensor(case.inputs["Label"], case.lod["Label"], place)}
    return fluid.Executor(place).run(prog, feed=feed, fetch_list=[g])[0]


def test_norm_by_times_scales_only_the_gradient():
    case = CTC_CASES[0]
    plain, normed = _ctc_grads(case, False), _ctc_grads(case, True)
    lengths = np.repeat(case.lod["Logits"][0], case.lod["Logits"][0])
    np.testing.assert_allclose(normed, plain / lengths[:, None], rtol=1e-10)
    assert np.abs(plain).max() > 0.1


def test_bad_label_is_actionable():
    case = _ctc_case("bad", [3], [[0, 1]])  # the blank inside a label
    with pytest.raises(Exception, match="other than blank=0"):
        run_forward(case)


# -- ctc_align / edit_distance / sequence_erase ------------------------------------------------

def _align_ref(seq, blank, merge=True):
    seq = list(seq)
    if merge:
        seq = [k for i, k in enumerate(seq) if i == 0 or k != seq[i - 1]]
    return [k for k in seq if k != blank]


def ctc_align_lod_ref(Input, lod, blank=0, merge_repeated=True, padding_value=0):
    off = np.concatenate([[0], np.cumsum(lod["Input"][-1])]).astype(int)
    out = [k for a, b in zip(off[:-1], off[1:])
           for k in _align_ref(Input[a:b, 0], blank, merge_repeated)]
    return {"Output": np.array(out or [-1], Input.dtype).reshape(-1, 1)}


def ctc_align_pad_ref(Input, InputLength, blank=0, merge_repeated=True, padding_value=0):
    out = np.full(Input.shape, padding_value, Input.dtype)
    lens = []
    for i, k in enumerate(InputLength.reshape(-1)):
        seq = _align_ref(Input[i, :k], blank, merge_repeated)
        out[i, :len(seq)] = seq
        lens.append(len(seq))
    return {"Output": out, "OutputLength": np.array(lens, np.int64).reshape(-1, 1)}


def test_ctc_align_forms():
    tokens = RNG.integers(0, 3, size=(9, 1)).astype(np.int64)
    for merge in (True, False):
        case = OpCase("ctc_align", {"Input": tokens}, ctc_align_lod_ref,
                      {"blank": 0, "merge_repeated": merge}, lod={"Input": [[4, 0, 5]]})
        got = run_forward(case, with_lod=True)["Output"][0]
        np.testing.assert_array_equal(np.array(got), ctc_align_lod_ref(
            tokens, {"Input": [[4, 0, 5]]}, 0, merge)["Output"])
        seqs = [_align_ref(tokens[a:b, 0], 0, merge) for a, b in ((0, 4), (4, 4), (4, 9))]
        assert got.recursive_sequence_lengths() == [[len(s) for s in seqs]]
    padded = RNG.integers(0, 4, size=(3, 5)).astype(np.int32)
    case = OpCase("ctc_align", {"Input": padded, "InputLength": np.array([[5], [2], [0]])},
                  ctc_align_pad_ref, {"blank": 1, "padding_value": -1})
    check_op(case)


def test_ctc_align_all_blank_gives_fluids_minus_one_row():
    case = OpCase("ctc_align", {"Input": np.zeros((3, 1), np.int64)}, ctc_align_lod_ref,
                  {"blank": 0}, lod={"Input": [[2, 1]]})
    got = run_forward(case, with_lod=True)["Output"][0]
    assert np.array(got).tolist() == [[-1]] and got.recursive_sequence_lengths() == [[0, 0]]


def _levenshtein_ref(a, b):
    d = np.zeros((len(a) + 1, len(b) + 1), int)
    d[:, 0], d[0, :] = range(len(a) + 1), range(len(b) + 1)
    for i, j in itertools.product(range(1, len(a) + 1), range(1, len(b) + 1)):
        d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (a[i - 1] != b[j - 1]))
    return d[-1, -1]


def edit_ref(Hyps, Refs, lod=None, HypsLength=None, RefsLength=None, normalized=False):
    if HypsLength is None:
        ho = np.concatenate([[0], np.cumsum(lod["Hyps"][-1])]).astype(int)
        ro = np.concatenate([[0], np.cumsum(lod["Refs"][-1])]).astype(int)
        pairs = [(Hyps[a:b, 0], Refs[c:d, 0]) for a, b, c, d in
                 zip(ho[:-1], ho[1:], ro[:-1], ro[1:])]
    else:
        pairs = [(Hyps[i, :h], Refs[i, :r]) for i, (h, r) in
                 enumerate(zip(HypsLength.reshape(-1), RefsLength.reshape(-1)))]
    dist = [_levenshtein_ref(list(h), list(r)) / (len(r) if normalized else 1)
            for h, r in pairs]
    return {"Out": np.float32(dist).reshape(-1, 1), "SequenceNum": np.int64([len(pairs)])}


EDIT_CASES = [
    OpCase("edit_distance", {"Hyps": RNG.integers(0, 4, (12, 1)), "Refs":
                             RNG.integers(0, 4, (13, 1))}, edit_ref, {"normalized": norm},
           lod={"Hyps": [[5, 0, 4, 3]], "Refs": [[3, 2, 6, 2]]}, name=f"edit_lod_{norm}",
           check_fp32=False)
    for norm in (False, True)] + [
    OpCase("edit_distance", {"Hyps": RNG.integers(0, 3, (3, 6)), "Refs": RNG.integers(0, 3, (3, 5)),
                             "HypsLength": np.array([6, 2, 0]),
                             "RefsLength": np.array([5, 5, 3])}, edit_ref, {"normalized": True},
           name="edit_padded", check_fp32=False)]


@pytest.mark.parametrize("case", EDIT_CASES, ids=str)
def test_edit_distance(case):
    want, got = edit_ref(**case.inputs, **case.attrs, **({"lod": case.lod} if case.lod else
                                                          {})), run_forward(case)
    for slot in ("Out", "SequenceNum"):
        assert got[slot][0].dtype == want[slot].dtype
        np.testing.assert_allclose(got[slot][0], want[slot], rtol=1e-6, err_msg=slot)


def test_edit_distance_empty_reference_normalized_is_actionable():
    case = OpCase("edit_distance", {"Hyps": np.ones((2, 1), np.int64),
                                    "Refs": np.ones((1, 1), np.int64)}, edit_ref,
                  {"normalized": True}, lod={"Hyps": [[1, 1]], "Refs": [[0, 1]]},
                  outputs={"Out": 1, "SequenceNum": 1})
    with pytest.raises(Exception, match="reference 0 is empty"):
        run_forward(case)


def test_sequence_erase():
    x = np.array([[1], [3], [2], [3], [3], [5]], np.int64)
    case = OpCase("sequence_erase", {"X": x}, None, {"tokens": [3, 5]},
                  lod={"X": [[2, 3, 1]]}, outputs={"Out": 1})
    got = run_forward(case, with_lod=True)["Out"][0]
    assert np.array(got).ravel().tolist() == [1, 2]
    assert got.recursive_sequence_lengths() == [[1, 1, 0]]


# -- layers ------------------------------------------------------------------------------------

def test_greedy_decoder_and_edit_distance_layers():
    place = fluid.CPUPlace()
    probs = RNG.random((7, 4)).astype("float32")
    label = np.array([[1], [2], [3], [2]], np.int64)
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        x = fluid.data("x", [-1, 4], "float32", lod_level=1)
        y = fluid.data("y", [-1, 1], "int64", lod_level=1)
        decoded = fluid.layers.ctc_greedy_decoder(x, blank=0)
        dist, num = fluid.layers.edit_distance(decoded, y, normalized=False)
        kept, _ = fluid.layers.edit_distance(decoded, y, normalized=False, ignored_tokens=[2])
        xp = fluid.data("xp", [2, 4, 4], "float32")
        xl = fluid.data("xl", [2, 1], "int64")
        dp, dl = fluid.layers.ctc_greedy_decoder(xp, blank=0, input_length=xl,
                                                 padding_value=-1)
    exe = fluid.Executor(place)
    exe.run(startup)
    padded = RNG.random((2, 4, 4)).astype("float32")
    got = exe.run(prog, feed={"x": fluid.create_lod_tensor(probs, [[4, 3]], place),
                              "y": fluid.create_lod_tensor(label, [[3, 1]], place),
                              "xp": padded, "xl": np.array([[4], [3]], np.int64)},
                  fetch_list=[decoded, dist, num, kept, dp, dl], return_numpy=False)
    best = probs.argmax(1)
    seqs = [_align_ref(best[:4], 0), _align_ref(best[4:], 0)]
    assert np.array(got[0]).ravel().tolist() == seqs[0] + seqs[1]
    assert got[0].recursive_sequence_lengths() == [[len(s) for s in seqs]]
    refs = [[1, 2, 3], [2]]
    assert np.array(got[1]).ravel().tolist() == [_levenshtein_ref(s, r) for s, r in
                                                 zip(seqs, refs)]
    assert np.array(got[2]).tolist() == [2]
    strip = [[k for k in s if k != 2] for s in seqs]
    assert np.array(got[3]).ravel().tolist() == [
        _levenshtein_ref(s, [k for k in r if k != 2]) for s, r in zip(strip, refs)]
    want = ctc_align_pad_ref(padded.argmax(2), np.array([[4], [3]]), 0, True, -1)
    np.testing.assert_array_equal(np.array(got[4]), want["Output"])
    np.testing.assert_array_equal(np.array(got[5]), want["OutputLength"])
