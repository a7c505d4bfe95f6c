"""lstm, lstmp and gru (fluid.layers.dynamic_lstm / dynamic_lstmp / dynamic_gru) against a
numpy reference that runs each sequence alone, step by step, and their gradients against
central finite differences (float64): peepholes on and off, is_reverse, initial states, an
empty sequence, other activations, lstmp's clipping, gru's origin_mode."""
from __future__ import annotations

import numpy as np
import pytest

from tests.op_harness import OpCase, check_op, rand

ACTS = {"sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "tanh": np.tanh,
        "relu": lambda x: np.maximum(x, 0.0), "identity": lambda x: x}


def _sequences(lod, reverse):
    """(sequence index, input rows in the order the recurrence reads them)."""
    offsets = np.concatenate([[0], np.cumsum(lod[-1])]).astype(int)
    for i, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        rows = list(range(a, b))
        yield i, rows[::-1] if reverse else rows


def lstm_ref(Input, Weight, Bias, lod, H0=None, C0=None, ProjWeight=None, use_peepholes=True,
             is_reverse=False, gate_activation="sigmoid", cell_activation="tanh",
             candidate_activation="tanh", proj_activation="tanh", cell_clip=0.0,
             proj_clip=0.0):
    d = Input.shape[1] // 4
    gact, cact, nact = ACTS[gate_activation], ACTS[cell_activation], ACTS[candidate_activation]
    b = Bias.reshape(-1)
    rec_size = Weight.shape[0]
    hidden, cell = np.zeros((len(Input), d)), np.zeros((len(Input), d))
    gates, cell_act = np.zeros_like(Input), np.zeros((len(Input), d))
    proj = np.zeros((len(Input), rec_size))
    for i, rows in _sequences(lod["Input"], is_reverse):
        r = H0[i] if H0 is not None else np.zeros(rec_size)
        c = C0[i] if C0 is not None else np.zeros(d)
        for row in rows:
            g = Input[row] + b[: 4 * d] + r @ Weight
            gc, gi, gf, go = g[:d], g[d: 2 * d], g[2 * d: 3 * d], g[3 * d:]
            if use_peepholes:
                gi, gf = gi + c * b[4 * d: 5 * d], gf + c * b[5 * d: 6 * d]
            cand, ig, fg = nact(gc), gact(gi), gact(gf)
            c = cand * ig + c * fg
            if cell_clip > 0:
                c = np.clip(c, -cell_clip, cell_clip)
            og = gact(go + c * b[6 * d:] if use_peepholes else go)
            h = og * cact(c)
            gates[row] = np.concatenate([cand, ig, fg, og])
            hidden[row], cell[row], cell_act[row] = h, c, cact(c)
            if ProjWeight is None:
                r = h
            else:
                r = h @ ProjWeight
                if proj_activation != "identity":
                    r = cact(r)  # fluid 1.8 applies cell_activation
                if proj_clip > 0:
                    r = np.clip(r, -proj_clip, proj_clip)
                proj[row] = r
    if ProjWeight is None:
        return {"Hidden": hidden, "Cell": cell, "BatchGate": gates, "BatchCellPreAct": cell_act}
    return {"Projection": proj, "Cell": cell, "BatchGate": gates, "BatchCellPreAct": cell_act,
            "BatchHidden": hidden}


def gru_ref(Input, Weight, lod, H0=None, Bias=None, activation="tanh",
            gate_activation="sigmoid", is_reverse=False, origin_mode=False):
    d = Weight.shape[0]
    w_ur, w_c = Weight.reshape(-1)[: 2 * d * d].reshape(d, 2 * d), \
        Weight.reshape(-1)[2 * d * d:].reshape(d, d)
    gact, cact = ACTS[gate_activation], ACTS[activation]
    hidden, gates, reset = np.zeros((len(Input), d)), np.zeros_like(Input), \
        np.zeros((len(Input), d))
    for i, rows in _sequences(lod["Input"], is_reverse):
        h = H0[i] if H0 is not None else np.zeros(d)
        for row in rows:
            x = Input[row] + (Bias.reshape(-1) if Bias is not None else 0.0)
            ur = gact(x[: 2 * d] + h @ w_ur)
            u, r = ur[:d], ur[d:]
            c = cact(x[2 * d:] + (r * h) @ w_c)
            reset[row] = r * h
            h = u * h + (1 - u) * c if origin_mode else u * c + (1 - u) * h
            gates[row], hidden[row] = np.concatenate([u, r, c]), h
    return {"BatchGate": gates, "BatchResetHiddenPrev": reset, "BatchHidden": hidden,
            "Hidden": hidden}


def _lstm_case(name, lengths, d=3, peep=True, h0=True, c0=True, proj=None, attrs=None):
    n, t = len(lengths), sum(lengths)
    rec = proj or d
    inputs = {"Input": rand(t, 4 * d), "Weight": rand(rec, 4 * d, low=-0.7, high=0.7),
              "Bias": rand(1, 7 * d if peep else 4 * d, low=-0.5, high=0.5)}
    if h0:
        inputs["H0"] = rand(n, rec)
    if c0:
        inputs["C0"] = rand(n, d)
    op = "lstm"
    if proj:
        op = "lstmp"
        inputs["ProjWeight"] = rand(d, proj, low=-0.8, high=0.8)
    return OpCase(op, inputs, lstm_ref, {"use_peepholes": peep, **(attrs or {})},
                  lod={"Input": [lengths]}, name=name)


def _gru_case(name, lengths, d=3, h0=True, bias=True, attrs=None):
    n, t = len(lengths), sum(lengths)
    inputs = {"Input": rand(t, 3 * d), "Weight": rand(d, 3 * d, low=-0.7, high=0.7)}
    if h0:
        inputs["H0"] = rand(n, d)
    if bias:
        inputs["Bias"] = rand(1, 3 * d, low=-0.5, high=0.5)
    return OpCase("gru", inputs, gru_ref, dict(attrs or {}), lod={"Input": [lengths]},
                  name=name)


LSTM_CASES = [
    _lstm_case("lstm_peepholes_states", [2, 3, 1]),
    _lstm_case("lstm_plain_reverse", [3, 1, 2], peep=False, h0=False, c0=False,
               attrs={"is_reverse": True}),
    _lstm_case("lstm_empty_sequence", [2, 0, 3], h0=True, c0=False),
    _lstm_case("lstm_other_activations", [2, 2], attrs={
        "gate_activation": "tanh", "cell_activation": "identity",
        "candidate_activation": "sigmoid"}),
    _lstm_case("lstmp_default", [2, 3, 1], proj=2),
    _lstm_case("lstmp_reverse_no_states", [1, 3], peep=False, h0=False, c0=False, proj=2,
               attrs={"is_reverse": True, "proj_activation": "identity"}),
    _lstm_case("lstmp_clipped", [3, 2], proj=2, attrs={"cell_clip": 0.35, "proj_clip": 0.3}),
    # A hidden size that is a multiple of 8, as dynamic_lstm(size=4 * 128) in the book's
    # understand_sentiment: fluid 1.8.5's CPU kernel takes another path there and its weight
    # and bias gradients disagree with finite differences (a bias entry 0 where they give
    # -0.0137, measured on that network); spmd keeps to numpy and finite differences.
    _lstm_case("lstm_hidden_of_eight", [3, 2, 4], d=8, h0=False, c0=False),
]
GRU_CASES = [
    _gru_case("gru_default", [2, 3, 1]),
    _gru_case("gru_origin_reverse", [3, 1, 2], attrs={"origin_mode": True,
                                                     "is_reverse": True}),
    _gru_case("gru_no_bias_no_h0_empty", [2, 0, 2], h0=False, bias=False),
    _gru_case("gru_relu_identity", [2, 2], attrs={"activation": "identity",
                                                  "gate_activation": "tanh"}),
]


@pytest.mark.parametrize("case", LSTM_CASES + GRU_CASES, ids=str)
def test_recurrent_op(case):
    check_op(case)


# -- layers ------------------------------------------------------------------------------------

def _build(layer, **kw):
    import spmd.fluid as fluid

    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 12], "float32", lod_level=1)
        out = getattr(fluid.layers, layer)(x, **kw)
    return prog, startup, out


def test_layers_make_fluids_parameters_and_keep_the_lod_level():
    prog, _, (h, c) = _build("dynamic_lstm", size=12)
    assert [(p.name, list(p.shape)) for p in prog.global_block().all_parameters()] == \
        [("lstm_0.w_0", [3, 12]), ("lstm_0.b_0", [1, 21])]
    assert h.lod_level == 1 and list(h.shape) == [-1, 3] and list(c.shape) == [-1, 3]
    prog, _, (r, c) = _build("dynamic_lstmp", size=12, proj_size=2, use_peepholes=False)
    assert [(p.name, list(p.shape)) for p in prog.global_block().all_parameters()] == \
        [("lstmp_0.w_0", [2, 12]), ("lstmp_0.w_1", [3, 2]), ("lstmp_0.b_0", [1, 12])]
    assert list(r.shape) == [-1, 2] and r.lod_level == 1
    prog, _, h = _build("dynamic_gru", size=4)
    assert [(p.name, list(p.shape)) for p in prog.global_block().all_parameters()] == \
        [("gru_0.w_0", [4, 12]), ("gru_0.b_0", [1, 12])]
    assert list(h.shape) == [-1, 4] and h.lod_level == 1


def test_layer_errors_are_actionable():
    from spmd.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="multiple of 4"):
        _build("dynamic_lstm", size=10)
    with pytest.raises(InvalidArgumentError, match=r"must be \[total steps, 9\]"):
        _build("dynamic_gru", size=3)
    with pytest.raises(InvalidArgumentError, match="always has a bias"):
        _build("dynamic_lstm", size=12, bias_attr=False)
    with pytest.raises(InvalidArgumentError, match="activation"):
        _build("dynamic_lstm", size=12, cell_activation="softmax")


def test_dense_feed_is_an_actionable_error():
    import spmd.fluid as fluid

    prog, startup, h = _build("dynamic_gru", size=4)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with pytest.raises(Exception, match="carries no LoD"):
        exe.run(prog, feed={"x": np.zeros((3, 12), "float32")}, fetch_list=[h])
