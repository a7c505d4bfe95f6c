"""gru_unit, lstm_unit and cudnn_lstm (fluid.layers.lstm): forward against numpy references
written from fluid 1.8's documented math, gradients against central finite differences in
float64 (the op-test harness), dropout between layers, and refusals that say what to do.
Comparisons with real Paddle are in test_rnn_units_oracle.py."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import RNG, OpCase, check_op, rand

import spmd.fluid as fluid
from spmd.core import unique_name
from spmd.errors import ExecutionError, InvalidArgumentError
from spmd.kernels.context import KernelContext
from spmd.kernels.registry import run_kernel
from spmd.ops import get_op_def
from spmd.ops.rnn import cudnn_lstm_weight_size


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


_ACTS = {0: lambda x: x, 1: _sigmoid, 2: np.tanh, 3: lambda x: np.maximum(x, 0.0)}


# -- numpy references --------------------------------------------------------------------------

def gru_ref(Input, HiddenPrev, Weight, Bias=None, activation=2, gate_activation=1,
            origin_mode=False):
    d = HiddenPrev.shape[1]
    flat = Weight.reshape(-1)  # fluid reads the [D, 3D] tensor's memory as [D, 2D] + [D, D]
    w_u, w_r = np.split(flat[: 2 * d * d].reshape(d, 2 * d), 2, axis=1)
    w_c = flat[2 * d * d:].reshape(d, d)
    x = Input + (0.0 if Bias is None else Bias.reshape(1, -1))
    u = _ACTS[gate_activation](x[:, :d] + HiddenPrev @ w_u)
    r = _ACTS[gate_activation](x[:, d: 2 * d] + HiddenPrev @ w_r)
    c = _ACTS[activation](x[:, 2 * d:] + (r * HiddenPrev) @ w_c)
    h = u * HiddenPrev + (1 - u) * c if origin_mode else u * c + (1 - u) * HiddenPrev
    return {"Gate": np.concatenate([u, r, c], axis=1), "ResetHiddenPrev": r * HiddenPrev,
            "Hidden": h}


def lstm_unit_ref(X, C_prev, forget_bias=0.0):
    i, f, o, g = np.split(X, 4, axis=1)
    c = _sigmoid(f + forget_bias) * C_prev + _sigmoid(i) * np.tanh(g)
    return {"C": c, "H": _sigmoid(o) * np.tanh(c)}


def _take(w, pos, shape):
    n = int(np.prod(shape))
    return w[pos: pos + n].reshape(shape), pos + n


def cudnn_lstm_ref(Input, InitH, InitC, W, hidden_size, num_layers, is_bidirec=False,
                   masks=None, **_):
    """cuDNN's LSTM, walking the flat W as fluid 1.8's test reads it: per layer and direction
    W_i, W_f, W_c, W_o (input) and R_i, R_f, R_c, R_o (recurrent), then all the biases."""
    hid, dirs = hidden_size, 2 if is_bidirec else 1
    pos, mats = 0, []
    for layer in range(num_layers):
        width = Input.shape[2] if layer == 0 else hid * dirs
        for _ in range(dirs):
            wx = []
            for _ in range(4):
                m, pos = _take(W, pos, (hid, width))
                wx.append(m)
            wh = []
            for _ in range(4):
                m, pos = _take(W, pos, (hid, hid))
                wh.append(m)
            mats.append((wx, wh))
    biases = []
    for _ in range(num_layers * dirs):
        b, pos = _take(W, pos, (8, hid))
        biases.append(b[:4] + b[4:])
    assert pos == W.size
    seq, last_h, last_c = Input, np.empty_like(InitH), np.empty_like(InitC)
    for layer in range(num_layers):
        if layer and masks is not None:
            seq = seq * masks[layer - 1]
        outs = []
        for j in range(dirs):
            k = layer * dirs + j
            (wx, wh), b = mats[k], biases[k]
            h, c = InitH[k], InitC[k]
            hs = np.empty(seq.shape[:2] + (hid,))
            for t in (reversed(range(seq.shape[0])) if j else range(seq.shape[0])):
                z = [seq[t] @ wx[q].T + h @ wh[q].T + b[q] for q in range(4)]
                c = _sigmoid(z[1]) * c + _sigmoid(z[0]) * np.tanh(z[2])
                h = _sigmoid(z[3]) * np.tanh(c)
                hs[t] = h
            last_h[k], last_c[k] = h, c
            outs.append(hs)
        seq = np.concatenate(outs, axis=2)
    return {"Out": seq, "last_h": last_h, "last_c": last_c}


# -- harness cases ------------------------------------------------------------------------------

def _gru_case(name, n=3, d=3, bias=True, **attrs):
    inputs = {"Input": rand(n, 3 * d), "HiddenPrev": rand(n, d), "Weight": rand(d, 3 * d)}
    if bias:
        inputs["Bias"] = rand(1, 3 * d)
    return OpCase("gru_unit", inputs, ref=gru_ref, attrs=attrs, name=name)


def _lstm_attrs(t, n, i, hid, layers, bidirec, **extra):
    return dict(max_len=extra.pop("max_len", t), input_size=i, hidden_size=hid,
                num_layers=layers, is_bidirec=bidirec, **extra)


def _lstm_case(name, t, n, i, hid, layers, bidirec=False, **extra):
    dirs = 2 if bidirec else 1
    attrs = _lstm_attrs(t, n, i, hid, layers, bidirec, **extra)
    size = cudnn_lstm_weight_size(i, hid, layers, bidirec)
    inputs = {"Input": rand(t, n, i), "InitH": rand(layers * dirs, n, hid),
              "InitC": rand(layers * dirs, n, hid), "W": rand(size, low=-0.7, high=0.7)}
    return OpCase("cudnn_lstm", inputs, ref=cudnn_lstm_ref, attrs=attrs, name=name)


CASES = [
    _gru_case("gru_unit"),
    _gru_case("gru_unit_origin_mode", origin_mode=True),
    _gru_case("gru_unit_no_bias", n=2, d=2, bias=False),
    _gru_case("gru_unit_relu_identity", activation=3, gate_activation=0),
    OpCase("lstm_unit", {"X": rand(3, 8), "C_prev": rand(3, 2)}, ref=lstm_unit_ref,
           name="lstm_unit"),
    OpCase("lstm_unit", {"X": rand(2, 12), "C_prev": rand(2, 3)}, ref=lstm_unit_ref,
           attrs={"forget_bias": 1.5}, name="lstm_unit_forget_bias"),
    _lstm_case("cudnn_lstm_one_layer", 3, 2, 3, 2, 1),
    _lstm_case("cudnn_lstm_two_layers", 3, 2, 2, 2, 2),
    _lstm_case("cudnn_lstm_bidirec_two_layers", 3, 2, 2, 2, 2, bidirec=True),
    _lstm_case("cudnn_lstm_shorter_than_max_len", 2, 1, 2, 3, 1, max_len=6),
    _lstm_case("cudnn_lstm_is_test_ignores_dropout", 2, 2, 2, 2, 2, is_test=True,
               dropout_prob=0.5),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_forward_and_gradients(case):
    check_op(case)


# -- cudnn_lstm dropout between layers ------------------------------------------------------

def _dropout_setup(p=0.4, seed=3):
    case = _lstm_case("dropout", 3, 2, 2, 2, 3, bidirec=True, dropout_prob=p, seed=seed)
    attrs = get_op_def("cudnn_lstm").validate_attrs(case.attrs, "test")
    return case.inputs, attrs


def _forward(ins, attrs):
    ctx = KernelContext(rng=np.random.default_rng(11))  # fresh: a fixed seed repeats its masks
    return run_kernel("cudnn_lstm", np, ins, attrs, {"Out", "last_h", "last_c", "Reserve"}, ctx)


def test_dropout_masks_scale_kept_values_and_feed_only_upper_layers():
    ins, attrs = _dropout_setup()
    got = _forward(ins, attrs)
    masks = got["Reserve"]
    assert masks.shape == (2, 3, 2, 4)  # layers above the first, T, N, hidden * directions
    assert set(np.unique(masks)) <= {0.0, 1.0 / 0.6} and 0 < (masks == 0).mean() < 1
    want = cudnn_lstm_ref(**ins, **attrs, masks=masks)
    for slot in ("Out", "last_h", "last_c"):
        np.testing.assert_allclose(got[slot], want[slot], rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(_forward(ins, attrs)["Reserve"], masks)
    off = dict(attrs, is_test=True)
    assert _forward(ins, off)["Reserve"].shape == (0,)
    no_drop = cudnn_lstm_ref(**ins, **off)
    np.testing.assert_allclose(_forward(ins, off)["Out"], no_drop["Out"], rtol=1e-10)


def test_dropout_gradient_uses_the_forward_masks():
    ins, attrs = _dropout_setup()
    weights = {s: RNG.uniform(0.5, 1.5, size=v.shape) for s, v in _forward(ins, attrs).items()
               if s != "Reserve"}
    fwd = _forward(ins, attrs)
    grad_ins = dict(ins, Reserve=fwd["Reserve"], **{s + "@GRAD": w for s, w in weights.items()})
    wants = {"Input@GRAD", "InitH@GRAD", "InitC@GRAD", "W@GRAD"}
    analytic = run_kernel("cudnn_lstm_grad", np, grad_ins, attrs, wants)

    def loss(feed):
        out = _forward(feed, attrs)
        return sum(float(np.sum(out[s] * w)) for s, w in weights.items())

    eps = 1e-6
    for slot in ("Input", "InitH", "W"):
        flat = ins[slot].reshape(-1)
        for j in RNG.choice(flat.size, size=min(12, flat.size), replace=False):
            plus, minus = flat.copy(), flat.copy()
            plus[j] += eps
            minus[j] -= eps
            numeric = (loss(dict(ins, **{slot: plus.reshape(ins[slot].shape)}))
                       - loss(dict(ins, **{slot: minus.reshape(ins[slot].shape)}))) / (2 * eps)
            np.testing.assert_allclose(analytic[slot + "@GRAD"].reshape(-1)[j], numeric,
                                       rtol=1e-5, atol=1e-7, err_msg=f"{slot}[{j}]")


def _dropout_program(seed, bind_reserve=True):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup), unique_name.guard():
        x = fluid.data("x", [3, 2, 2], "float32")
        h0 = fluid.data("h0", [4, 2, 2], "float32")
        w = np.linspace(-0.5, 0.5, cudnn_lstm_weight_size(2, 2, 2, True), dtype="float32")
        out, _, _ = fluid.layers.lstm(
            x, h0, h0, 3, 2, 2, dropout_prob=0.5, is_bidirec=True, seed=seed,
            default_initializer=fluid.initializer.NumpyArrayInitializer(w))
        if not bind_reserve:
            op = prog.global_block().ops[-1]
            op.outputs.pop("Reserve")
        loss = fluid.layers.mean(out)
        fluid.optimizer.SGD(0.1).minimize(loss)
    r = np.random.RandomState(0)
    feed = {"x": r.uniform(-1, 1, (3, 2, 2)).astype("float32"),
            "h0": r.uniform(-1, 1, (4, 2, 2)).astype("float32")}
    return prog, startup, feed, out


def _outputs(seed, steps=2):
    prog, startup, feed, out = _dropout_program(seed)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return [exe.run(prog, feed=feed, fetch_list=[out])[0] for _ in range(steps)]


def test_fixed_seed_gives_a_repeatable_sequence_of_masks():
    with fluid.scope_guard(fluid.Scope()):
        first = _outputs(seed=5)
    with fluid.scope_guard(fluid.Scope()):
        again = _outputs(seed=5)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], first[1])  # a step later: new masks, new weights


def test_gradient_without_reserve_says_what_to_bind():
    prog, startup, feed, out = _dropout_program(seed=1, bind_reserve=False)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        with pytest.raises(ExecutionError, match="bind Reserve"):
            exe.run(prog, feed=feed, fetch_list=[out])


# -- layers -------------------------------------------------------------------------------------

def _build(fn, with_startup=False):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup), unique_name.guard():
        result = fn()
    return (prog, startup, result) if with_startup else (prog, result)


def test_layers_are_fluid_layers_names_with_fluid_parameters():
    def build():
        x = fluid.data("x", [None, 12], "float32")
        h = fluid.data("h", [None, 4], "float32")
        fluid.layers.gru_unit(x, h, 12)
        fluid.layers.lstm_unit(fluid.data("xt", [None, 5], "float32"), h, h)
        seq = fluid.data("seq", [6, None, 5], "float32")
        h0 = fluid.data("h0", [4, None, 3], "float32")
        return fluid.layers.lstm(seq, h0, h0, 6, 3, 2, is_bidirec=True)

    prog, (out, last_h, last_c) = _build(build)
    params = [(p.name, list(p.shape)) for p in prog.global_block().all_parameters()]
    assert params == [("gru_unit_0.w_0", [4, 12]), ("gru_unit_0.b_0", [1, 12]),
                      ("fc_0.w_0", [9, 16]), ("fc_0.b_0", [16]),
                      ("cudnn_lstm_0.w_0", [cudnn_lstm_weight_size(5, 3, 2, True)])]
    assert list(out.shape) == [6, -1, 6] and list(last_h.shape) == [4, -1, 3]
    assert [op.type for op in prog.global_block().ops] == [
        "gru_unit", "concat", "mul", "elementwise_add", "lstm_unit", "cudnn_lstm"]


@pytest.mark.parametrize("build, match", [
    (lambda x, h: fluid.layers.gru_unit(x, h, 10), "3 \\* the hidden size"),
    (lambda x, h: fluid.layers.gru_unit(x, h, 12, activation="gelu"), "not one of"),
    (lambda x, h: fluid.layers.lstm_unit(x, h, fluid.data("c", [3, 5], "float32")),
     "same first \\(batch\\) dim"),
    (lambda x, h: fluid.layers.lstm_unit(x, h, fluid.data("c", [2, 5], "float32")),
     "same hidden size"),
    (lambda x, h: fluid.layers.lstm(x, h, h, 5, 4, 1), "must be 3-D time-major"),
])
def test_layer_refusals_say_what_to_do(build, match):
    def fn():
        return build(fluid.data("x", [2, 12], "float32"), fluid.data("h", [2, 4], "float32"))

    with pytest.raises(InvalidArgumentError, match=match):
        _build(fn)


def test_gru_unit_activation_is_ignored_like_fluid_with_a_warning():
    def build():
        x, h = fluid.data("x", [2, 6], "float32"), fluid.data("h", [2, 2], "float32")
        return fluid.layers.gru_unit(x, h, 6, activation="relu", gate_activation="identity")

    with pytest.warns(UserWarning, match="fluid 1.8's gru_unit ignores them"):
        prog, _ = _build(build)
    attrs = prog.global_block().ops[0].attrs
    assert (attrs["activation"], attrs["gate_activation"]) == (2, 1)


def _append_lstm(x_shape, h_shape, w_size, **attrs):
    def build():
        x = fluid.data("x", x_shape, "float32")
        h = fluid.data("h", h_shape, "float32")
        w = fluid.data("w", [w_size], "float32")
        block = fluid.default_main_program().current_block()
        outs = {s: [block.create_var(name=s, dtype="float32")]
                for s in ("Out", "last_h", "last_c")}
        block.append_op("cudnn_lstm", {"Input": [x], "InitH": [h], "InitC": [h], "W": [w]},
                        outs, dict(dict(input_size=x_shape[-1], hidden_size=h_shape[-1],
                                        max_len=5), **attrs))
        return outs["Out"][0]

    return _build(build)


@pytest.mark.parametrize("x_shape, h_shape, w_size, attrs, match", [
    ([5, 2, 3], [1, 2, 4], 100, {}, "flat cuDNN weight of shape \\[144\\]"),
    ([5, 2, 3], [2, 2, 4], 144, {}, "num_layers \\* directions \\(1 \\* 1\\)"),
    ([7, 2, 3], [1, 2, 4], 144, {}, "more than max_len=5"),
    ([5, 2, 3], [1, 2, 4], 144, {"dropout_prob": 1.0}, "dropout_prob must be in \\[0, 1\\)"),
])
def test_cudnn_lstm_refusals_name_the_expected_shape(x_shape, h_shape, w_size, attrs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        _append_lstm(x_shape, h_shape, w_size, **attrs)


def test_cudnn_lstm_run_time_checks_the_fed_sequence_length():
    prog, out = _append_lstm([-1, 2, 3], [1, 2, 4], 144)
    feed = {"x": np.zeros((7, 2, 3), "float32"), "h": np.zeros((1, 2, 4), "float32"),
            "w": np.zeros(144, "float32")}
    with pytest.raises(ExecutionError, match="7 time steps, more than max_len=5"):
        fluid.Executor(fluid.CPUPlace()).run(prog, feed=feed, fetch_list=[out])


def test_gru_unit_run_time_batch_mismatch_is_explained():
    def build():
        x, h = fluid.data("x", [-1, 6], "float32"), fluid.data("h", [-1, 2], "float32")
        return fluid.layers.gru_unit(x, h, 6)[0]

    prog, startup, hidden = _build(build, with_startup=True)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        with pytest.raises(ExecutionError, match="feed matching batches"):
            exe.run(prog, feed={"x": np.zeros((3, 6), "float32"),
                                "h": np.zeros((2, 2), "float32")}, fetch_list=[hidden])
