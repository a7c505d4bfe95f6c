"""Store fluid 1.8.5's fluid.contrib.layers basic_lstm / basic_gru (and their units) forward
outputs and a few SGD steps of training, from named parameters set to stored values, for
tests/unit/test_fluid_contrib_rnn.py. Run with PaddlePaddle 1.8.5 outside the checkout."""
import os
import sys

import numpy as np
import paddle
import paddle.fluid as fluid
from paddle.fluid.contrib.layers import (
    BasicGRUUnit,
    BasicLSTMUnit,
    basic_gru,
    basic_lstm,
)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

B, T, D, H = 3, 4, 5, 6


def feeds(case):
    rng = np.random.RandomState(7)
    out = {"x": rng.uniform(-1, 1, (B, T, D)).astype("float32"),
           "lengths": np.array([4, 2, 3], "int64")}
    layers = case.get("num_layers", 1) * (2 if case.get("bidirectional") else 1)
    out["h0"] = rng.uniform(-0.5, 0.5, (layers, B, H)).astype("float32")
    out["c0"] = rng.uniform(-0.5, 0.5, (layers, B, H)).astype("float32")
    return out


def build(case):
    x = fluid.data("x", [None, T, D], "float32")
    lengths = fluid.data("lengths", [None], "int64")
    layers = case.get("num_layers", 1) * (2 if case.get("bidirectional") else 1)
    h0 = fluid.data("h0", [layers, None, H], "float32")
    c0 = fluid.data("c0", [layers, None, H], "float32")
    kw = dict(num_layers=case.get("num_layers", 1), bidirectional=case.get("bidirectional",
                                                                           False),
              sequence_length=lengths if case.get("masked") else None,
              param_attr=fluid.ParamAttr(name="w"), bias_attr=fluid.ParamAttr(name="b"))
    if case["kind"] == "lstm":
        outs = basic_lstm(x, h0 if case.get("init") else None,
                          c0 if case.get("init") else None, H, forget_bias=0.7, **kw)
    elif case["kind"] == "gru":
        outs = basic_gru(x, h0 if case.get("init") else None, H, **kw)
    elif case["kind"] == "lstm_unit":
        unit = BasicLSTMUnit("unit", H, fluid.ParamAttr(name="w"), fluid.ParamAttr(name="b"))
        outs = unit(x[:, 0], h0[0], c0[0])
    else:
        unit = BasicGRUUnit("unit", H, fluid.ParamAttr(name="w"), fluid.ParamAttr(name="b"))
        outs = [unit(x[:, 0], h0[0])]
    outs = list(outs)
    loss = fluid.layers.mean(outs[0])
    for o in outs[1:]:
        loss = loss + fluid.layers.mean(o * o)
    return outs, loss


def param_values(program):
    rng = np.random.RandomState(3)
    return {p.name: rng.uniform(-0.4, 0.4, p.shape).astype("float32")
            for p in sorted(program.global_block().all_parameters(), key=lambda p: p.name)}


def run(case):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        outs, loss = build(case)
        test = main.clone(for_test=True)
        fluid.optimizer.SGD(0.5).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        params = param_values(main)
        for name, value in params.items():
            scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
        feed = feeds(case)
        forward = exe.run(test, feed=feed, fetch_list=[o.name for o in outs])
        losses = [float(exe.run(main, feed=feed, fetch_list=[loss])[0][0]) for _ in range(3)]
        after = {n: np.array(scope.find_var(n).get_tensor()) for n in params}
    return {"params": params, "forward": forward, "losses": losses, "after": after,
            "shapes": [list(o.shape) for o in outs]}


CASES = {
    "lstm_2layers_bidirectional_masked_init": dict(kind="lstm", num_layers=2,
                                                   bidirectional=True, masked=True, init=True),
    "lstm_1layer": dict(kind="lstm"),
    "gru_1layer": dict(kind="gru"),
    "gru_2layers_bidirectional_masked_init": dict(kind="gru", num_layers=2, bidirectional=True,
                                                  masked=True, init=True),
    "lstm_unit": dict(kind="lstm_unit"),
    "gru_unit": dict(kind="gru_unit"),
}

if __name__ == "__main__":
    save("contrib_rnn", {name: {"case": case, **run(case)} for name, case in CASES.items()},
         meta={"paddle": paddle.__version__})
