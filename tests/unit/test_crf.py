"""linear_chain_crf, crf_decoding and chunk_eval against numpy references: the CRF by brute
force over every tag path (so log Z, the gold score and the Viterbi path are checked without a
recursion), in the LoD and the padded (Length) forms, with an empty sequence and a one-step
sequence; linear_chain_crf's gradients against central finite differences (float64);
chunk_eval's four schemes, excluded chunk types and padded input against a reference that
reads chunks scheme by scheme; the layers' builders and errors; fluid.metrics.ChunkEvaluator
fed with chunk_eval's counts."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError
from tests.op_harness import OpCase, check_op, rand, run_forward

RNG = np.random.default_rng(7)


def _score(em, w, path):
    s = w[0, path[0]] + w[1, path[-1]] + sum(em[t, k] for t, k in enumerate(path))
    return s + sum(w[2 + a, b] for a, b in zip(path[:-1], path[1:]))


def _paths(length, d):
    return [list(p) for p in itertools.product(range(d), repeat=length)]


def _split(Emission, Label, lod, Length):
    """[(emission [L, D], labels [L])] per sequence, from either form."""
    if Length is None:
        offsets = np.concatenate([[0], np.cumsum(lod["Emission"][-1])]).astype(int)
        return [(Emission[a:b], Label.reshape(-1)[a:b]) for a, b in zip(offsets[:-1],
                                                                          offsets[1:])]
    lab = Label.reshape(Label.shape[0], -1)
    return [(Emission[i, :k], lab[i, :k]) for i, k in enumerate(Length.reshape(-1))]


def crf_ref(Emission, Transition, Label, lod=None, Length=None):
    nll = []
    for em, y in _split(Emission, Label, lod, Length):
        if len(em) == 0:
            nll.append(0.0)
            continue
        scores = np.array([_score(em, Transition, p) for p in _paths(len(em), em.shape[1])])
        log_z = np.log(np.exp(scores - scores.max()).sum()) + scores.max()
        nll.append(log_z - _score(em, Transition, list(y)))
    return {"LogLikelihood": np.array(nll).reshape(-1, 1)}


def decode_ref(Emission, Transition, lod=None, Length=None, Label=None):
    label = Label if Label is not None else np.zeros(
        Emission.shape[:2] if Length is not None else (len(Emission), 1), np.int64)
    out = []
    for em, y in _split(Emission, label, lod, Length):
        paths = _paths(len(em), em.shape[1]) if len(em) else [[]]
        best = max(paths, key=lambda p: _score(em, Transition, p) if p else 0.0)
        out.append((np.array(best) == y).astype(np.int64) if Label is not None
                   else np.array(best, dtype=np.int64))
    if Length is None:
        return {"ViterbiPath": np.concatenate(out).reshape(-1, 1).astype(np.int64)}
    padded = np.zeros(Emission.shape[:2], np.int64)
    for i, p in enumerate(out):
        padded[i, :len(p)] = p
    return {"ViterbiPath": padded}


def _tags(*shape, d=3):
    return RNG.integers(0, d, size=shape).astype(np.int64)


CRF_CASES = [
    OpCase("linear_chain_crf", {"Emission": rand(6, 3), "Transition": rand(5, 3),
                                "Label": _tags(6, 1)}, crf_ref, lod={"Emission": [[2, 3, 1]]},
           outputs={"Alpha": 1, "EmissionExps": 1, "TransitionExps": 1, "LogLikelihood": 1},
           grad_outputs=["LogLikelihood"], name="crf_lod"),
    OpCase("linear_chain_crf", {"Emission": rand(5, 4) * 2, "Transition": rand(6, 4),
                                "Label": _tags(5, 1, d=4)}, crf_ref,
           lod={"Emission": [[3, 0, 2]]},
           outputs={"Alpha": 1, "EmissionExps": 1, "TransitionExps": 1, "LogLikelihood": 1},
           grad_outputs=["LogLikelihood"], name="crf_lod_empty_sequence"),
    OpCase("linear_chain_crf", {"Emission": rand(3, 4, 3), "Transition": rand(5, 3),
                                "Label": _tags(3, 4), "Length": np.array([2, 4, 1])},
           crf_ref,
           outputs={"Alpha": 1, "EmissionExps": 1, "TransitionExps": 1, "LogLikelihood": 1},
           grad_outputs=["LogLikelihood"], name="crf_padded"),
]

DECODE_CASES = [
    OpCase("crf_decoding", {"Emission": rand(7, 3), "Transition": rand(5, 3)}, decode_ref,
           lod={"Emission": [[3, 1, 3]]}, out_lod={"ViterbiPath": [[3, 1, 3]]},
           name="decode_lod"),
    OpCase("crf_decoding", {"Emission": rand(6, 3), "Transition": rand(5, 3),
                            "Label": _tags(6, 1)}, decode_ref, lod={"Emission": [[4, 2]]},
           name="decode_lod_label"),
    OpCase("crf_decoding", {"Emission": rand(3, 4, 3), "Transition": rand(5, 3),
                            "Length": np.array([4, 2, 0])}, decode_ref, name="decode_padded"),
    OpCase("crf_decoding", {"Emission": rand(2, 3, 3), "Transition": rand(5, 3),
                            "Label": _tags(2, 3, 1), "Length": np.array([3, 2])}, decode_ref,
           name="decode_padded_label"),
]


for _case in DECODE_CASES:
    _case.grad = []  # crf_decoding has no gradient


@pytest.mark.parametrize("case", CRF_CASES + DECODE_CASES, ids=str)
def test_crf_ops(case):
    check_op(case)


def test_crf_alpha_and_exps_are_fluids_intermediates():
    case = CRF_CASES[0]
    got = run_forward(case)
    em, w = case.inputs["Emission"], case.inputs["Transition"]
    np.testing.assert_allclose(got["EmissionExps"][0], np.exp(em - em.max(1, keepdims=True)))
    np.testing.assert_allclose(got["TransitionExps"][0], np.exp(w))
    alpha = got["Alpha"][0]
    np.testing.assert_allclose(alpha.sum(1), np.ones(len(em)))  # each step normalized
    first = np.exp(w[0] + em[0])
    np.testing.assert_allclose(alpha[0], first / first.sum())


# -- chunk_eval --------------------------------------------------------------------------------

TAG_TYPES = {"IOB": 2, "IOE": 2, "IOBES": 4, "plain": 1}


def chunks_ref(tags, scheme, num_types):
    """Chunks (begin, end, type) read the way a person reads each scheme."""
    k = TAG_TYPES[scheme]
    names = {"IOB": "BI", "IOE": "IE", "IOBES": "BIES", "plain": "I"}[scheme]
    out, cur = [], None  # cur: [begin, end, type, last tag]
    for i, t in enumerate(tags):
        kind, tag = t // k, names[t % k] if t < num_types * k else "O"
        if kind == num_types:
            tag = "O"
        extend = cur is not None and cur[2] == kind and tag != "O" and (
            (scheme == "IOB" and tag == "I") or scheme == "plain" or
            (scheme == "IOE" and cur[3] != "E") or
            (scheme == "IOBES" and tag in "IE" and cur[3] in "BI"))
        if extend:
            cur[1], cur[3] = i, tag
            continue
        if cur is not None:
            out.append(tuple(cur[:3]))
            cur = None
        if tag != "O":
            cur = [i, i, kind, tag]
    if cur is not None:
        out.append(tuple(cur[:3]))
    return out


def chunk_ref(Inference, Label, num_chunk_types, chunk_scheme, excluded_chunk_types=(),
              lod=None, SeqLength=None):
    if SeqLength is None:
        offsets = np.concatenate([[0], np.cumsum(lod["Label"][-1])]).astype(int)
        seqs = [(Inference.reshape(-1)[a:b], Label.reshape(-1)[a:b])
                for a, b in zip(offsets[:-1], offsets[1:])]
    else:
        seqs = [(Inference[i, :k], Label[i, :k]) for i, k in enumerate(SeqLength.reshape(-1))]
    n_i = n_l = n_c = 0
    for inf, lab in seqs:
        a = [c for c in chunks_ref(list(inf), chunk_scheme, num_chunk_types)
             if c[2] not in excluded_chunk_types]
        b = [c for c in chunks_ref(list(lab), chunk_scheme, num_chunk_types)
             if c[2] not in excluded_chunk_types]
        n_i, n_l, n_c = n_i + len(a), n_l + len(b), n_c + len(set(a) & set(b))
    p = n_c / n_i if n_i else 0.0
    r = n_c / n_l if n_l else 0.0
    f = 2 * p * r / (p + r) if n_c else 0.0
    return {"Precision": np.float32([p]), "Recall": np.float32([r]),
            "F1-Score": np.float32([f]), "NumInferChunks": np.int64([n_i]),
            "NumLabelChunks": np.int64([n_l]), "NumCorrectChunks": np.int64([n_c])}


def _chunk_case(scheme, types=3, lengths=(6, 4, 7, 3), excluded=(), padded=False):
    top = types * TAG_TYPES[scheme] + 1
    label = RNG.integers(0, top, size=(sum(lengths), 1)).astype(np.int64)
    infer = label.copy()
    flip = RNG.random(label.shape) < 0.3
    infer[flip] = RNG.integers(0, top, size=int(flip.sum()))
    attrs = {"num_chunk_types": types, "chunk_scheme": scheme,
             "excluded_chunk_types": list(excluded)}
    name = f"chunk_{scheme}" + ("_excluded" if excluded else "") + ("_padded" if padded else "")
    if not padded:
        lod = {"Inference": [list(lengths)], "Label": [list(lengths)]}
        return OpCase("chunk_eval", {"Inference": infer, "Label": label}, chunk_ref, attrs,
                      lod=lod, name=name, check_fp32=False)
    t = max(lengths)
    pad_i, pad_l = np.zeros((len(lengths), t), np.int64), np.zeros((len(lengths), t), np.int64)
    off = 0
    for i, k in enumerate(lengths):
        pad_i[i, :k], pad_l[i, :k] = infer[off:off + k, 0], label[off:off + k, 0]
        off += k
    return OpCase("chunk_eval", {"Inference": pad_i, "Label": pad_l,
                                 "SeqLength": np.array(lengths, np.int64)}, chunk_ref, attrs,
                  name=name, check_fp32=False)


CHUNK_CASES = [_chunk_case(s, lengths=(9, 4, 12, 3, 8)) for s in TAG_TYPES] + [
    _chunk_case("IOB", excluded=(1,)), _chunk_case("IOBES", padded=True),
    _chunk_case("IOE", types=2, lengths=(5, 0, 6), padded=True)]


@pytest.mark.parametrize("case", CHUNK_CASES, ids=str)
def test_chunk_eval(case):
    # chunk_eval's rates are float32 whatever the run's float type, so the harness's
    # float64 dtype check does not apply: outputs are compared here
    want = chunk_ref(**case.inputs, **case.attrs, **({"lod": case.lod} if case.lod else {}))
    got = run_forward(case)
    for slot, ref in want.items():
        assert got[slot][0].dtype == ref.dtype, slot
        np.testing.assert_allclose(got[slot][0], ref, rtol=1e-6, err_msg=f"{case} {slot}")
    assert int(want["NumLabelChunks"][0]) > 0


def test_chunk_eval_known_sentence():
    # IOB with 2 types: B-0=0 I-0=1 B-1=2 I-1=3 O=4
    label = [0, 1, 4, 2, 3, 3, 4, 0]
    infer = [0, 1, 4, 2, 3, 4, 4, 1]  # first chunk right, second cut short, last I-0 alone
    got = chunk_ref(np.array(infer), np.array(label), 2, "IOB",
                    lod={"Label": [[8]]})
    assert (int(got["NumInferChunks"][0]), int(got["NumLabelChunks"][0]),
            int(got["NumCorrectChunks"][0])) == (3, 3, 2)  # the lone I-0 still starts a chunk


# -- layers ------------------------------------------------------------------------------------

def _tagger(padded=False):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        if padded:
            em = fluid.data("em", [-1, 4, 3], "float32")
            lab = fluid.data("lab", [-1, 4], "int64")
            length = fluid.data("len", [-1], "int64")
        else:
            em = fluid.data("em", [-1, 3], "float32", lod_level=1)
            lab = fluid.data("lab", [-1, 1], "int64", lod_level=1)
            length = None
        cost = fluid.layers.linear_chain_crf(em, lab, fluid.ParamAttr(name="crfw"),
                                             length=length)
        path = fluid.layers.crf_decoding(em, fluid.ParamAttr(name="crfw"), length=length)
        ev = fluid.layers.chunk_eval(path, lab, "IOB", 1,
                                     seq_length=length if padded else None)
    return prog, startup, cost, path, ev


def test_layers_build_fluid_parameter_and_shapes():
    prog, _, cost, path, ev = _tagger()
    params = prog.global_block().all_parameters()
    assert [(p.name, list(p.shape)) for p in params] == [("crfw", [5, 3])]
    assert list(cost.shape) == [-1, 1] and cost.lod_level == 0
    assert path.dtype == fluid.core.VarDesc.VarType.INT64 or str(path.dtype) == "int64"
    assert path.lod_level == 1 and len(ev) == 6


def test_padded_tagger_runs_and_chunk_evaluator_accumulates():
    prog, startup, cost, path, ev = _tagger(padded=True)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feed = {"em": rand(2, 4, 3).astype("float32"),
            "lab": np.array([[0, 1, 2, 0], [2, 0, 1, 1]], np.int64),
            "len": np.array([4, 3], np.int64)}
    metric = fluid.metrics.ChunkEvaluator()
    for _ in range(2):
        c, p, *counts = exe.run(prog, feed=feed, fetch_list=[cost, path] + list(ev[3:]))
        metric.update(*[int(v[0]) for v in counts])
    assert c.shape == (2, 1) and p.shape == (2, 4) and p[1, 3] == 0
    precision, recall, f1 = metric.eval()
    n_i, n_l, n_c = (int(v[0]) for v in counts)
    assert metric.num_infer_chunks == 2 * n_i and metric.num_correct_chunks == 2 * n_c
    assert precision == pytest.approx(n_c / n_i if n_i else 0)
    assert recall == pytest.approx(n_c / n_l)


def test_layer_errors_are_actionable():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        em = fluid.data("em", [-1, 3], "float32", lod_level=1)
        with pytest.raises(InvalidArgumentError, match="no parameter named 'nope'"):
            fluid.layers.crf_decoding(em, fluid.ParamAttr(name="nope"))
        lab = fluid.data("lab", [-1, 1], "int64", lod_level=1)
        with pytest.raises(InvalidArgumentError, match="chunk_scheme must be one of"):
            fluid.layers.chunk_eval(lab, lab, "BIO", 2)
        with pytest.raises(InvalidArgumentError, match="padded"):
            fluid.layers.linear_chain_crf(em, lab, length=fluid.data("l", [-1], "int64"))


def test_unfed_lod_is_an_actionable_error():
    prog, startup, cost, _, _ = _tagger()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with pytest.raises(Exception, match="LoD"):
        exe.run(prog, feed={"em": rand(3, 3).astype("float32"),
                            "lab": np.zeros((3, 1), np.int64)}, fetch_list=[cost])
