"""fluid 1.8's RNN cell API (GRUCell, LSTMCell, RNNCell, rnn, birnn): forward against numpy
references (sequence_length masking, is_reverse, time_major), gradients against central finite
differences in float64 for the inputs, the initial states and every parameter, parameter names
and shapes as fluid 1.8 makes them, and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.core import unique_name
from spmd.errors import InvalidArgumentError

RNG = np.random.default_rng(1808)
layers = fluid.layers


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def gru_step(x, h, p):
    gw, cw, gb, cb = p
    gates = sigmoid(np.concatenate([x, h], 1) @ gw + gb)
    r, u = np.split(gates, 2, axis=1)
    c = np.tanh(np.concatenate([x, r * h], 1) @ cw + cb)
    new = u * h + (1 - u) * c
    return new, new


def lstm_step(x, states, p, forget_bias=1.0):
    w, b = p
    h, c = states
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ w + b, 4, axis=1)
    c2 = c * sigmoid(f + forget_bias) + sigmoid(i) * np.tanh(j)
    h2 = np.tanh(c2) * sigmoid(o)
    return h2, [h2, c2]


def rnn_ref(step, x, init, params, lengths=None, time_major=False, is_reverse=False):
    """numpy fluid.layers.rnn: outputs [batch, time, H] (or time major) and final states."""
    xt = x if time_major else x.transpose(1, 0, 2)
    steps, batch = xt.shape[:2]
    order = range(steps - 1, -1, -1) if is_reverse else range(steps)
    states, outs = init, [None] * steps
    for t in order:
        out, new = step(xt[t], states, params)
        if lengths is not None:
            m = (t < lengths).astype(x.dtype)[:, None]
            if isinstance(new, list):
                new = [n * m + s * (1 - m) for n, s in zip(new, states)]
            else:
                new = new * m + states * (1 - m)
        outs[t], states = out, new
    out = np.stack(outs)
    return (out if time_major else out.transpose(1, 0, 2)), states


# -- building and running -------------------------------------------------------------------

def _run_program(build, feeds, params, wrt=(), dtype="float64"):
    """Build under fresh programs: build(vars) -> (fetches, loss or None, param names in the
    order of `params`); set the parameters; fetch outputs and d loss / d (wrt feeds, params)."""
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        vs = {}
        for k, a in feeds.items():
            vs[k] = fluid.data(k, [-1, *a.shape[1:]] if a.ndim else [1], str(a.dtype))
            vs[k].stop_gradient = k not in wrt
        outs, loss, names = build(vs)
        grads = []
        if loss is not None:
            grads = fluid.gradients([loss], [vs[k] for k in wrt] +
                                    [main.global_block().var(n) for n in names])
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        for n, a in zip(names, params):
            scope.var(n).get_tensor().set(a.astype(dtype))

        def run(feed, fetch):
            return [np.asarray(v) for v in exe.run(main, feed=feed, fetch_list=fetch)]

        got = run(feeds, list(outs) + list(grads))
    return got[:len(outs)], got[len(outs):], (main, startup, scope, exe, names, loss)


def _numeric_grads(ctx, feeds, params, wrt, eps=1e-6):
    main, _, scope, exe, names, loss = ctx
    out = []
    with fluid.scope_guard(scope):
        def value():
            return float(np.asarray(exe.run(main, feed=feeds, fetch_list=[loss])[0]).sum())

        for k in wrt:
            a, g = feeds[k], np.zeros_like(feeds[k])
            for idx in np.ndindex(a.shape):
                keep = a[idx]
                a[idx] = keep + eps
                up = value()
                a[idx] = keep - eps
                down = value()
                a[idx] = keep
                g[idx] = (up - down) / (2 * eps)
            out.append(g)
        for n, p in zip(names, params):
            p, g = p.copy(), np.zeros_like(p)
            for idx in np.ndindex(p.shape):
                keep = p[idx]
                for sign in (1, -1):
                    p[idx] = keep + sign * eps
                    scope.var(n).get_tensor().set(p)
                    g[idx] += sign * value()
                p[idx] = keep
                g[idx] /= 2 * eps
            scope.var(n).get_tensor().set(p)
            out.append(g)
    return out


def _gru_params(d, h):
    return [RNG.uniform(-0.7, 0.7, (d + h, 2 * h)), RNG.uniform(-0.7, 0.7, (d + h, h)),
            RNG.uniform(-0.3, 0.3, (2 * h,)), RNG.uniform(-0.3, 0.3, (h,))]


def _lstm_params(d, h):
    return [RNG.uniform(-0.7, 0.7, (d + h, 4 * h)), RNG.uniform(-0.3, 0.3, (4 * h,))]


GRU_NAMES = ["GRUCell/BasicGRUUnit_0.w_0", "GRUCell/BasicGRUUnit_0.w_1",
             "GRUCell/BasicGRUUnit_0.b_0", "GRUCell/BasicGRUUnit_0.b_1"]
LSTM_NAMES = ["LSTMCell/BasicLSTMUnit_0.w_0", "LSTMCell/BasicLSTMUnit_0.b_0"]


# -- the cells ------------------------------------------------------------------------------

def test_cells_make_fluids_parameters():
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        h = fluid.data("h", [None, 4], "float32")
        layers.GRUCell(4)(x, h)
        layers.GRUCell(4, param_attr=fluid.ParamAttr(name="g"),
                       bias_attr=fluid.ParamAttr(name="gb"))(x, h)
        layers.LSTMCell(4)(x, [h, h])
    got = {p.name: list(p.shape) for p in main.global_block().all_parameters()}
    assert got == {
        "GRUCell/BasicGRUUnit_0.w_0": [7, 8], "GRUCell/BasicGRUUnit_0.w_1": [7, 4],
        "GRUCell/BasicGRUUnit_0.b_0": [8], "GRUCell/BasicGRUUnit_0.b_1": [4],
        "g_gate": [7, 8], "g_candidate": [7, 4], "gb_gate": [8], "gb_candidate": [4],
        "LSTMCell/BasicLSTMUnit_0.w_0": [7, 16], "LSTMCell/BasicLSTMUnit_0.b_0": [16]}
    # fluid's initializers: Xavier uniform weights, zero biases
    kinds = {op.output_arg_names[0]: op.type for op in startup.global_block().ops}
    assert kinds["g_gate"] == "uniform_random" and kinds["gb_gate"] == "fill_constant"


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_cell_step_forward_and_grad(kind):
    n, d, h = 3, 2, 3
    x, h0, c0 = RNG.uniform(-1, 1, (n, d)), RNG.uniform(-1, 1, (n, h)), RNG.uniform(-1, 1, (n, h))
    w_out = RNG.uniform(-1, 1, (n, h))
    if kind == "gru":
        params, names, feeds = _gru_params(d, h), GRU_NAMES, {"x": x, "h": h0}
        want, _ = gru_step(x, h0, params)
        want_c = None
    else:
        params, names, feeds = _lstm_params(d, h), LSTM_NAMES, {"x": x, "h": h0, "c": c0}
        want, (_, want_c) = lstm_step(x, [h0, c0], params)

    def build(vs):
        if kind == "gru":
            out, new = layers.GRUCell(h, dtype="float64")(vs["x"], vs["h"])
            outs = [out, new]
        else:
            out, (new_h, new_c) = layers.LSTMCell(h, dtype="float64")(vs["x"],
                                                                      [vs["h"], vs["c"]])
            outs = [out, new_c]
        loss = layers.reduce_sum(outs[0] * vs["wo"])
        if kind == "lstm":
            loss = loss + layers.reduce_sum(outs[1]) * 0.5
        return outs, loss, names

    wrt = sorted(feeds)
    feeds["wo"] = w_out
    outs, grads, ctx = _run_program(build, feeds, params, wrt)
    np.testing.assert_allclose(outs[0], want, rtol=1e-10, atol=1e-12)
    if want_c is not None:
        np.testing.assert_allclose(outs[1], want_c, rtol=1e-10, atol=1e-12)
    for g, ng in zip(grads, _numeric_grads(ctx, feeds, params, wrt)):
        np.testing.assert_allclose(g, ng, rtol=1e-5, atol=1e-8)


# -- rnn --------------------------------------------------------------------------------------

RNN_CASES = {  # name -> (cell, time_major, is_reverse, with lengths, initial states given)
    "gru": ("gru", False, False, False, True),
    "gru_lengths": ("gru", False, False, True, True),
    "gru_reverse_lengths": ("gru", False, True, True, True),
    "gru_time_major": ("gru", True, False, True, True),
    "gru_zero_init": ("gru", False, False, True, False),
    "lstm_lengths": ("lstm", False, False, True, True),
    "lstm_reverse_time_major": ("lstm", True, True, True, True),
}


def _rnn_case(name, n=3, t=4, d=2, h=3):
    kind, time_major, is_reverse, with_len, with_init = RNN_CASES[name]
    x = RNG.uniform(-1, 1, (t, n, d) if time_major else (n, t, d))
    lengths = np.array([4, 2, 1][:n], dtype="int64")
    feeds = {"x": x}
    if with_len:
        feeds["len"] = lengths
    init = [RNG.uniform(-1, 1, (n, h)) for _ in range(2 if kind == "lstm" else 1)]
    if not with_init:
        init = [np.zeros((n, h))] * len(init)
    else:
        feeds.update({f"s{k}": s for k, s in enumerate(init)})
    params = _gru_params(d, h) if kind == "gru" else _lstm_params(d, h)
    step = gru_step if kind == "gru" else lstm_step
    want_out, want_state = rnn_ref(step, x, init if kind == "lstm" else init[0], params,
                                   lengths if with_len else None, time_major, is_reverse)
    feeds["wo"] = RNG.uniform(-1, 1, want_out.shape)

    def build(vs):
        cell = (layers.GRUCell(h, dtype="float64") if kind == "gru"
                else layers.LSTMCell(h, dtype="float64"))
        states = None
        if with_init:
            states = vs["s0"] if kind == "gru" else [vs["s0"], vs["s1"]]
        out, final = layers.rnn(cell, vs["x"], states, vs.get("len"), time_major=time_major,
                                is_reverse=is_reverse)
        finals = [final] if kind == "gru" else list(final)
        loss = layers.reduce_sum(out * vs["wo"])
        for k, s in enumerate(finals):
            loss = loss + layers.reduce_sum(s) * (0.5 + k)
        return [out, *finals], loss, GRU_NAMES if kind == "gru" else LSTM_NAMES

    wants = [want_out, *([want_state] if kind == "gru" else want_state)]
    return feeds, params, build, wants


@pytest.mark.parametrize("name", sorted(RNN_CASES))
def test_rnn_forward_matches_numpy(name):
    feeds, params, build, wants = _rnn_case(name)
    outs, _, _ = _run_program(build, feeds, params)
    for k, (g, w) in enumerate(zip(outs, wants)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=f"{name} out {k}")


@pytest.mark.parametrize("name", ["gru_reverse_lengths", "lstm_reverse_time_major",
                                  "gru_zero_init"])
def test_rnn_grad_matches_finite_differences(name):
    feeds, params, build, _ = _rnn_case(name, n=2, t=3, d=2, h=2)
    wrt = sorted(k for k in feeds if k not in ("len", "wo"))
    _, grads, ctx = _run_program(build, feeds, params, wrt)
    for k, (g, ng) in enumerate(zip(grads, _numeric_grads(ctx, feeds, params, wrt))):
        np.testing.assert_allclose(g, ng, rtol=1e-5, atol=1e-8, err_msg=f"{name} grad {k}")


def test_rnn_float32_default_states_and_dynamic_time():
    x = RNG.uniform(-1, 1, (2, 5, 3)).astype("float32")
    params = [p.astype("float32") for p in _gru_params(3, 4)]

    def build(vs):
        out, state = layers.rnn(layers.GRUCell(4), vs["x"])
        return [out, state], None, GRU_NAMES

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.data("x", [None, None, 3], "float32")
        out, _ = layers.rnn(layers.GRUCell(4), xv)
    assert list(out.shape) == [-1, -1, 4]
    (out, state), _, _ = _run_program(build, {"x": x}, params, dtype="float32")
    want, want_state = rnn_ref(gru_step, x.astype("float64"), np.zeros((2, 4)),
                               [p.astype("float64") for p in params])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state, want_state, rtol=1e-5, atol=1e-6)


class _AddCell(layers.RNNCell):
    """A user cell with nested states and an extra call argument."""

    def call(self, inputs, states, scale=None):
        a, (b,) = states
        new_a = a + inputs * scale
        return {"sum": new_a, "prod": new_a * b}, [new_a, (b * 2,)]

    @property
    def state_shape(self):
        return [[2], ([2],)]


def test_rnn_user_cell_nested_states_and_kwargs():
    x = RNG.uniform(-1, 1, (2, 3, 2))

    def build(vs):
        cell = _AddCell()
        init = cell.get_initial_states(vs["x"], dtype="float64", init_value=1.0)
        scale = layers.fill_constant([1], "float64", 3.0)
        out, (a, (b,)) = layers.rnn(cell, vs["x"], init, scale=scale)
        return [out["sum"], out["prod"], a, b], None, []

    (s, p, a, b), _, _ = _run_program(build, {"x": x}, [])
    want_s = 1 + 3 * np.cumsum(x, axis=1)
    np.testing.assert_allclose(s, want_s)
    np.testing.assert_allclose(p, want_s * 2.0 ** np.arange(3)[None, :, None])
    np.testing.assert_allclose(a, want_s[:, -1])
    np.testing.assert_allclose(b, np.full((2, 2), 8.0))


def test_birnn_concatenates_directions():
    n, t, d, h = 3, 4, 2, 3
    x, lengths = RNG.uniform(-1, 1, (n, t, d)), np.array([4, 3, 1], dtype="int64")
    pf, pb = _gru_params(d, h), _gru_params(d, h)
    names = GRU_NAMES + [n.replace("_0.", "_1.") for n in GRU_NAMES]

    def build(vs):
        out, (sf, sb) = layers.birnn(layers.GRUCell(h, dtype="float64"),
                                     layers.GRUCell(h, dtype="float64"), vs["x"], None,
                                     vs["len"])
        return [out, sf, sb], None, names

    (out, sf, sb), _, _ = _run_program(build, {"x": x, "len": lengths}, pf + pb)
    of, wf = rnn_ref(gru_step, x, np.zeros((n, h)), pf, lengths)
    ob, wb = rnn_ref(gru_step, x, np.zeros((n, h)), pb, lengths, is_reverse=True)
    np.testing.assert_allclose(out, np.concatenate([of, ob], -1), rtol=1e-10)
    np.testing.assert_allclose(sf, wf, rtol=1e-10)
    np.testing.assert_allclose(sb, wb, rtol=1e-10)


# -- errors -------------------------------------------------------------------------------------

def test_errors_name_the_fix():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3, 2], "float32")
        with pytest.raises(InvalidArgumentError, match="hidden_size must be a positive int"):
            layers.GRUCell(0)
        with pytest.raises(InvalidArgumentError, match="gate_activation must be a callable"):
            layers.GRUCell(3, gate_activation="sigmoid")
        with pytest.raises(InvalidArgumentError, match="dtype must be 'float32' or 'float64'"):
            layers.LSTMCell(3, dtype="int32")
        with pytest.raises(InvalidArgumentError, match="does not define call"):
            layers.rnn(type("NoCall", (layers.RNNCell,), {"state_shape": [3]})(), x)
        with pytest.raises(InvalidArgumentError, match=r"states must be a list \[hidden, cell\]"):
            layers.LSTMCell(3)(x[:, 0], x[:, 0])
        with pytest.raises(InvalidArgumentError, match="sequence_length .* must be int32 or "
                                                       "int64"):
            layers.rnn(layers.GRUCell(3), x, sequence_length=fluid.data("l", [None], "float32"))
        with pytest.raises(InvalidArgumentError, match=r"birnn: initial_states must be"):
            layers.birnn(layers.GRUCell(3), layers.GRUCell(3), x, initial_states=[x])
        with pytest.warns(UserWarning, match="ignores gate_activation"):
            layers.LSTMCell(3, activation=layers.relu)
