"""Reference outputs for gru_unit, lstm_unit and fluid.layers.lstm (cudnn_lstm), for
tests/unit/test_rnn_units_oracle.py.

Run it once with each oracle's Python, from a folder outside the checkout:

    cd /tmp && /tmp/pd18/bin/python /path/to/tests/oracle/make_rnn_units.py  # rnn_units.json
    cd /tmp && /tmp/pd33/bin/python /path/to/tests/oracle/make_rnn_units.py  # rnn_units_paddle

- PaddlePaddle 1.8.5 runs gru_unit and lstm_unit on CPU: GRU_CASES / LSTM_UNIT_CASES store the
  layer's outputs and the gradients of sum(hidden * W) (W fixed) for its inputs and parameters,
  with every parameter set by NumpyArrayInitializer; TRAIN_CASES a few SGD steps of a small
  model (losses and final parameters). LSTM_LAYER_CASES store only what fluid.layers.lstm
  builds (parameter name and shape, static output shapes): 1.8.5's cudnn_lstm is GPU-only.
- cudnn_lstm's numbers come from PaddlePaddle 3.3.1 (legacy IR, FLAGS_enable_pir_api=0): its
  `rnn` op (mode LSTM) runs on CPU with the same cuDNN math, taking the weights as a list;
  `weight_list` cuts fluid's flat W into that list by cuDNN's layout (every weight matrix,
  layer-major then direction, then every bias), as paddle.nn.LSTM's flatten_parameters does.
  The gradients of the list are concatenated back into the flat W's order.

run_gru, run_lstm_unit, run_train and run_lstm (spmd side) are shared with the test, which
runs the same programs with spmd.fluid.
"""
import os
import sys

import numpy as np

# name -> (batch, hidden, origin_mode, with bias, activation)
GRU_CASES = {
    "default": (3, 4, False, True, "tanh"),
    "origin_mode": (3, 4, True, True, "tanh"),
    "no_bias": (2, 3, False, False, "tanh"),
    "relu_ignored": (3, 4, False, True, "relu"),  # fluid's builder always uses tanh
}
# name -> (batch, input width, hidden, forget_bias, with bias)
LSTM_UNIT_CASES = {
    "default": (3, 5, 4, 0.0, True),
    "forget_bias": (2, 3, 4, 1.5, True),
    "no_bias": (2, 3, 2, 0.0, False),
}
# name -> (seq_len, batch, input_size, hidden, num_layers, is_bidirec, max_len)
LSTM_CASES = {
    "one_layer": (5, 3, 4, 4, 1, False, 5),
    "two_layers": (4, 2, 3, 5, 2, False, 4),
    "bidirec": (4, 2, 3, 3, 1, True, 4),
    "bidirec_two_layers": (3, 2, 4, 3, 2, True, 6),
}
TRAIN_CASES = ("gru", "lstm_unit")
LSTM_TRAIN_CASE = "bidirec_two_layers"
LR, STEPS = 0.5, 5


def _rng(name):
    return np.random.RandomState(sum(ord(ch) for ch in name) + 17)


def _weight(shape):
    return np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)


def _init(fluid, value):
    return fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(value))


def _run(fluid, build, feeds, wrt_feeds):
    """Build (outs, loss) under fresh programs; fetch outs and d loss / d (feeds, params)."""
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        vs = {}
        for k, a in sorted(feeds.items()):
            vs[k] = fluid.data(k, list(a.shape), str(a.dtype))
            vs[k].stop_gradient = k not in wrt_feeds
        outs, loss = build(vs)
        params = sorted(prog.global_block().all_parameters(), key=lambda p: p.name)
        wrt = [vs[k] for k in sorted(wrt_feeds)] + params
        grads = fluid.gradients([loss], wrt)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got = exe.run(prog, feed=feeds, fetch_list=list(outs) + list(grads))
    return {"outs": [np.asarray(a) for a in got[: len(outs)]],
            "grads": [np.asarray(a) for a in got[len(outs):]],
            "params": [[p.name, [int(d) for d in p.shape]] for p in params],
            "shapes": [[int(d) for d in o.shape] for o in outs]}


def run_gru(fluid, name):
    n, d, origin, bias, act = GRU_CASES[name]
    r = _rng("gru" + name)
    feeds = {"x": r.uniform(-1, 1, (n, 3 * d)).astype("float32"),
             "h": r.uniform(-1, 1, (n, d)).astype("float32")}
    w = r.uniform(-0.8, 0.8, (d, 3 * d)).astype("float32")
    b = r.uniform(-0.5, 0.5, (1, 3 * d)).astype("float32")
    loss_w = _weight((n, d)).astype("float32")

    def build(vs):
        hidden, reset, gate = fluid.layers.gru_unit(
            vs["x"], vs["h"], 3 * d, param_attr=_init(fluid, w),
            bias_attr=_init(fluid, b) if bias else False, activation=act, origin_mode=origin)
        lw = fluid.layers.assign(loss_w)
        return [hidden, reset, gate], fluid.layers.reduce_sum(hidden * lw)

    return _run(fluid, build, feeds, ["h", "x"])


def run_lstm_unit(fluid, name):
    n, m, d, forget_bias, bias = LSTM_UNIT_CASES[name]
    r = _rng("lstm_unit" + name)
    feeds = {"x": r.uniform(-1, 1, (n, m)).astype("float32"),
             "h": r.uniform(-1, 1, (n, d)).astype("float32"),
             "c": r.uniform(-1, 1, (n, d)).astype("float32")}
    w = r.uniform(-0.8, 0.8, (m + d, 4 * d)).astype("float32")
    b = r.uniform(-0.5, 0.5, (4 * d,)).astype("float32")
    loss_h, loss_c = _weight((n, d)).astype("float32"), _weight((n, d))[::-1].astype("float32")

    def build(vs):
        h, c = fluid.layers.lstm_unit(vs["x"], vs["h"], vs["c"], forget_bias=forget_bias,
                                      param_attr=_init(fluid, w),
                                      bias_attr=_init(fluid, b) if bias else False)
        loss = fluid.layers.reduce_sum(h * fluid.layers.assign(loss_h)) + \
            fluid.layers.reduce_sum(c * fluid.layers.assign(loss_c))
        return [h, c], loss

    return _run(fluid, build, feeds, ["c", "h", "x"])


def run_train(fluid, name):
    """A few SGD steps: fc -> gru_unit / lstm_unit (two steps sharing the parameters) -> fc ->
    mean squared error. Returns the losses and the final parameters (sorted by name)."""
    r = _rng("train" + name)
    n, m, d = 4, 3, 4
    x1, x2 = r.uniform(-1, 1, (n, m)).astype("float32"), r.uniform(-1, 1, (n, m)).astype("float32")
    y = r.uniform(-1, 1, (n, 1)).astype("float32")
    init = {"in": r.uniform(-0.5, 0.5, (m, 3 * d if name == "gru" else m)).astype("float32"),
            "rec": r.uniform(-0.5, 0.5, (d, 3 * d) if name == "gru" else (m + d, 4 * d)),
            "out": r.uniform(-0.5, 0.5, (d, 1)).astype("float32")}
    init["rec"] = init["rec"].astype("float32")
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        vs = {k: fluid.data(k, [n, a.shape[1]], "float32") for k, a in
              (("x1", x1), ("x2", x2), ("y", y))}
        h = fluid.layers.fill_constant([n, d], "float32", 0.0)
        c = fluid.layers.fill_constant([n, d], "float32", 0.0)
        # fluid 1.8's lstm_unit_grad fails when C_prev needs no gradient (it always writes
        # C_prev@GRAD), so the initial state is marked as needing one
        h.stop_gradient = c.stop_gradient = False
        attr_in = fluid.ParamAttr(name="proj.w", initializer=fluid.initializer.
                                  NumpyArrayInitializer(init["in"]))
        attr_rec = fluid.ParamAttr(name="rec.w", initializer=fluid.initializer.
                                   NumpyArrayInitializer(init["rec"]))
        for x in (vs["x1"], vs["x2"]):
            step = fluid.layers.fc(x, init["in"].shape[1], param_attr=attr_in, bias_attr=False)
            if name == "gru":
                h, _, _ = fluid.layers.gru_unit(step, h, 3 * d, param_attr=attr_rec,
                                                bias_attr=fluid.ParamAttr(name="rec.b"))
            else:
                h, c = fluid.layers.lstm_unit(step, h, c, forget_bias=1.0, param_attr=attr_rec,
                                              bias_attr=fluid.ParamAttr(name="rec.b"))
        pred = fluid.layers.fc(h, 1, param_attr=_init(fluid, init["out"]), bias_attr=False)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, vs["y"]))
        fluid.optimizer.SGD(LR).minimize(loss)
        params = sorted(p.name for p in prog.global_block().all_parameters())
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    losses = [float(np.asarray(exe.run(prog, feed={"x1": x1, "x2": x2, "y": y},
                                       fetch_list=[loss])[0]).reshape(-1)[0])
              for _ in range(STEPS)]
    final = exe.run(prog, feed={"x1": x1, "x2": x2, "y": y}, fetch_list=params)
    return {"losses": losses, "params": params, "final": [np.asarray(a) for a in final]}


# -- fluid.layers.lstm (cudnn_lstm) ------------------------------------------------------------

def lstm_inputs(name):
    t, n, i, hid, layers, bidirec, _ = LSTM_CASES[name]
    dirs = 2 if bidirec else 1
    r = _rng("lstm" + name)
    size = 0
    for layer in range(layers):
        width = i if layer == 0 else hid * dirs
        size += dirs * (4 * hid * (width + hid) + 8 * hid)
    return {"x": r.uniform(-1, 1, (t, n, i)).astype("float32"),
            "h0": r.uniform(-1, 1, (layers * dirs, n, hid)).astype("float32"),
            "c0": r.uniform(-1, 1, (layers * dirs, n, hid)).astype("float32"),
            "w": r.uniform(-0.5, 0.5, (size,)).astype("float32"),
            "loss_w": _weight((t, n, hid * dirs)).astype("float32")}


def weight_list(flat, name):
    """Fluid's flat cuDNN W cut into paddle's rnn-op WeightList: every [4H, in] input weight
    and [4H, H] recurrent weight (layer-major, then direction), then every bias pair."""
    _, _, i, hid, layers, bidirec, _ = LSTM_CASES[name]
    dirs = 2 if bidirec else 1
    shapes = []
    for layer in range(layers):
        width = i if layer == 0 else hid * dirs
        shapes += [(4 * hid, width), (4 * hid, hid)] * dirs
    shapes += [(4 * hid,)] * (2 * layers * dirs)
    out, offset = [], 0
    for s in shapes:
        size = int(np.prod(s))
        out.append(flat[offset: offset + size].reshape(s))
        offset += size
    assert offset == flat.size
    return out


def run_lstm(fluid, name, with_meta=False):
    """spmd (or fluid 1.8.5 building only): fluid.layers.lstm with W from lstm_inputs."""
    t, n, i, hid, layers, bidirec, max_len = LSTM_CASES[name]
    feeds = lstm_inputs(name)
    w, loss_w = feeds.pop("w"), feeds.pop("loss_w")

    def build(vs):
        out, last_h, last_c = fluid.layers.lstm(
            vs["x"], vs["h0"], vs["c0"], max_len, hid, layers, is_bidirec=bidirec,
            default_initializer=fluid.initializer.NumpyArrayInitializer(w))
        loss = fluid.layers.reduce_sum(out * fluid.layers.assign(loss_w)) + \
            fluid.layers.reduce_sum(last_h) * 0.5 + fluid.layers.reduce_sum(last_c) * 0.25
        return [out, last_h, last_c], loss

    if with_meta:  # 1.8.5: what the layer builds (its kernel is GPU-only)
        prog, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(prog, startup):
            vs = {k: fluid.data(k, list(a.shape), str(a.dtype)) for k, a in feeds.items()}
            outs = fluid.layers.lstm(vs["x"], vs["h0"], vs["c0"], max_len, hid, layers,
                                     is_bidirec=bidirec)
            params = prog.global_block().all_parameters()
        return {"params": [[p.name, [int(d) for d in p.shape]] for p in params],
                "shapes": [[int(d) for d in o.shape] for o in outs]}
    return _run(fluid, build, feeds, ["c0", "h0", "x"])


def _paddle_rnn(paddle, vs, ws, name, is_test=False):
    _, _, i, hid, layers, bidirec, _ = LSTM_CASES[name]
    block = paddle.static.default_main_program().current_block()
    dtype = vs["x"].dtype
    out = block.create_var(name="rnn_out", dtype=dtype)
    state = [block.create_var(name="rnn_h", dtype=dtype), block.create_var(name="rnn_c",
                                                                           dtype=dtype)]
    reserve = block.create_var(name="rnn_reserve", dtype="uint8")
    dstate = block.create_var(name="rnn_dropout_state", dtype="uint8")
    block.append_op(type="rnn", inputs={"Input": vs["x"], "PreState": [vs["h0"], vs["c0"]],
                                        "WeightList": ws},
                    outputs={"Out": out, "State": state, "Reserve": reserve,
                             "DropoutState": dstate},
                    attrs={"hidden_size": hid, "input_size": i, "num_layers": layers,
                           "is_bidirec": bidirec, "dropout_prob": 0.0, "is_test": is_test,
                           "mode": "LSTM", "seed": 0})
    return out, state[0], state[1]


def _op(paddle, type, inputs, attrs=None):
    """Append a legacy op (3.3.1's paddle.sum, matmul, ... refuse legacy-IR Variables)."""
    block = paddle.static.default_main_program().current_block()
    out = block.create_var(name=paddle.utils.unique_name.generate(type), dtype="float32")
    outputs = {"Out": out}
    if type in ("reshape2",):
        outputs["XShape"] = block.create_var(name=out.name + ".xshape", dtype="float32")
    block.append_op(type=type, inputs=inputs, outputs=outputs, attrs=attrs or {})
    return out


def _sum(paddle, x):
    return _op(paddle, "reduce_sum", {"X": x}, {"reduce_all": True, "dim": [],
                                                "keep_dim": False})


def run_lstm_paddle(paddle, name):
    """PaddlePaddle 3.3.1's rnn op on the same inputs: the stored cudnn_lstm numbers."""
    feeds = lstm_inputs(name)
    w, loss_w = feeds.pop("w"), feeds.pop("loss_w")
    pieces = weight_list(w, name)
    prog, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(prog, startup):
        vs = {}
        for k, a in sorted(feeds.items()):
            vs[k] = paddle.static.data(k, list(a.shape), "float32")
            vs[k].stop_gradient = False
        ws = []
        for j, a in enumerate(pieces):
            feeds[f"w{j}"] = a
            ws.append(paddle.static.data(f"w{j}", list(a.shape), "float32"))
            ws[-1].stop_gradient = False
        outs = _paddle_rnn(paddle, vs, ws, name)
        lw = paddle.static.data("loss_w", list(loss_w.shape), "float32")
        feeds["loss_w"] = loss_w
        loss = _sum(paddle, outs[0] * lw) + _sum(paddle, outs[1]) * 0.5 + \
            _sum(paddle, outs[2]) * 0.25
        grads = paddle.static.gradients([loss], [vs["c0"], vs["h0"], vs["x"]] + ws)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    got = exe.run(prog, feed=feeds, fetch_list=list(outs) + list(grads))
    got = [np.asarray(a) for a in got]
    flat_grad = np.concatenate([g.reshape(-1) for g in got[6:]])
    return {"outs": got[:3], "grads": got[3:6] + [flat_grad]}


def train_lstm_paddle(paddle, name):
    """SGD on the rnn op's weight list (elementwise, so the same as SGD on the flat W):
    loss = mean((fc(Out[-1]) - y)^2); returns the losses and the final flat W."""
    feeds = lstm_inputs(name)
    w = feeds.pop("w")
    feeds.pop("loss_w")
    t, n, _, hid, _, bidirec, _ = LSTM_CASES[name]
    dirs = 2 if bidirec else 1
    out_w = _weight((hid * dirs, 1)).astype("float32")
    y = _rng("lstm_y").uniform(-1, 1, (n, 1)).astype("float32")
    prog, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(prog, startup):
        vs = {k: paddle.static.data(k, list(a.shape), "float32") for k, a in feeds.items()}
        ws = [paddle.static.create_parameter(
            list(a.shape), "float32", name=f"lstm_w{j}",
            default_initializer=paddle.nn.initializer.Assign(a))
            for j, a in enumerate(weight_list(w, name))]
        out, _, _ = _paddle_rnn(paddle, vs, ws, name)
        last = _op(paddle, "slice", {"Input": out}, {"axes": [0], "starts": [t - 1],
                                                     "ends": [t], "decrease_axis": [0]})
        head = paddle.static.create_parameter(
            [hid * dirs, 1], "float32", name="out_w",
            default_initializer=paddle.nn.initializer.Assign(out_w))
        pred = _op(paddle, "matmul_v2", {"X": last, "Y": head})
        yv = paddle.static.data("y", [n, 1], "float32")
        diff = _op(paddle, "elementwise_sub", {"X": pred, "Y": yv})
        loss = _op(paddle, "reduce_mean", {"X": _op(paddle, "elementwise_mul",
                                                     {"X": diff, "Y": diff})},
                   {"reduce_all": True, "dim": [], "keep_dim": False})
        paddle.optimizer.SGD(LR).minimize(loss)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    feeds["y"] = y
    losses = [float(np.asarray(exe.run(prog, feed=feeds, fetch_list=[loss])[0]).reshape(-1)[0])
              for _ in range(STEPS)]
    final = exe.run(prog, feed=feeds, fetch_list=[f"lstm_w{j}" for j in range(len(ws))])
    return {"losses": losses, "final_w": np.concatenate([np.asarray(a).reshape(-1)
                                                         for a in final]),
            "y": y, "out_w": out_w}


def train_lstm(fluid, name, y, out_w):
    """The spmd side of train_lstm_paddle: fluid.layers.lstm with the flat W."""
    feeds = lstm_inputs(name)
    w = feeds.pop("w")
    feeds.pop("loss_w")
    t, n, _, hid, layers, bidirec, max_len = LSTM_CASES[name]
    dirs = 2 if bidirec else 1
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        vs = {k: fluid.data(k, list(a.shape), "float32") for k, a in feeds.items()}
        out, _, _ = fluid.layers.lstm(
            vs["x"], vs["h0"], vs["c0"], max_len, hid, layers, is_bidirec=bidirec,
            name="lstm", default_initializer=fluid.initializer.NumpyArrayInitializer(w))
        last = fluid.layers.reshape(fluid.layers.slice(out, [0], [t - 1], [t]),
                                    [n, hid * dirs])
        pred = fluid.layers.fc(last, 1, param_attr=_init(fluid, out_w), bias_attr=False)
        yv = fluid.data("y", [n, 1], "float32")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, yv))
        fluid.optimizer.SGD(LR).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feeds["y"] = y
    losses = [float(np.asarray(exe.run(prog, feed=feeds, fetch_list=[loss])[0]).reshape(-1)[0])
              for _ in range(STEPS)]
    final = exe.run(prog, feed=feeds, fetch_list=["lstm.w_0"])[0]
    return {"losses": losses, "final_w": np.asarray(final)}


def main():
    os.environ["FLAGS_enable_pir_api"] = "0"  # 3.3.1: the legacy static IR
    import paddle

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    if paddle.__version__.startswith("1."):
        import paddle.fluid as fluid

        def fresh(fn, *args, **kwargs):  # every case names its layers from _0
            with fluid.unique_name.guard():
                return fn(fluid, *args, **kwargs)

        cases = {"gru/" + k: fresh(run_gru, k) for k in GRU_CASES}
        cases.update({"lstm_unit/" + k: fresh(run_lstm_unit, k) for k in LSTM_UNIT_CASES})
        cases.update({"train/" + k: fresh(run_train, k) for k in TRAIN_CASES})
        cases.update({"lstm_layer/" + k: fresh(run_lstm, k, with_meta=True)
                      for k in LSTM_CASES})
        save("rnn_units", cases, meta={"paddle": paddle.__version__})
    else:
        paddle.enable_static()
        cases = {"lstm/" + k: run_lstm_paddle(paddle, k) for k in LSTM_CASES}
        cases["train_lstm"] = train_lstm_paddle(paddle, LSTM_TRAIN_CASE)
        save("rnn_units_paddle", cases, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
