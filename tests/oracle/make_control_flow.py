"""Reference outputs of control flow on sub-blocks (While, while_loop, cond, case, switch_case,
Switch, IfElse, StaticRNN, tensor arrays, is_empty), for tests/unit/test_control_flow_oracle.py.

    cd /tmp && /tmp/pd18/bin/python /path/to/tests/oracle/make_control_flow.py
        # -> data/control_flow.json

Each case builds one program with `fluid` (the real one here, spmd.fluid in the test), runs it
and returns its fetches: forward values and the gradients fluid.gradients gives. TRAIN_CASES
train a small model with a While loop or a StaticRNN for a few SGD steps and return the losses.
"""
import os
import sys

import numpy as np

_R = np.random.RandomState(11)
X23 = _R.uniform(-1, 1, (2, 3)).astype("float32")
W33 = _R.uniform(-0.8, 0.8, (3, 3)).astype("float32")
B3 = _R.uniform(-0.5, 0.5, (3,)).astype("float32")
SEQ = _R.uniform(-1, 1, (4, 2, 3)).astype("float32")  # [time, batch, features]
WX = _R.uniform(-0.6, 0.6, (3, 5)).astype("float32")
WH = _R.uniform(-0.6, 0.6, (5, 5)).astype("float32")
ROWS = _R.uniform(-1, 1, (5, 3)).astype("float32")
TARGET = _R.uniform(-1, 1, (2, 5)).astype("float32")


def _param(fluid, name, value):
    return fluid.layers.create_parameter(
        list(value.shape), "float32", name=name,
        attr=fluid.ParamAttr(name=name,
                             initializer=fluid.initializer.NumpyArrayInitializer(value)))


def _data(fluid, name, value, grad=True):
    v = fluid.data(name, list(value.shape), str(value.dtype))
    v.stop_gradient = not grad
    return v


def while_arrays(fluid):
    """While with increment/less_than/Print in the body, writing i * x into an array."""
    L = fluid.layers
    x = _data(fluid, "x", X23)
    i = L.fill_constant([1], "int64", 0)
    n = L.fill_constant([1], "int64", 3)
    c = L.less_than(i, n)
    arr = L.create_array("float32")
    loop = L.While(c)
    with loop.block():
        scaled = L.scale(x, 1.0) * L.cast(i + 1, "float32")
        L.Print(i, message="step")
        L.array_write(scaled, i, array=arr)
        L.increment(i, 1, in_place=True)
        L.less_than(i, n, cond=c)
    length = L.array_length(arr)
    last = L.array_read(arr, L.fill_constant([1], "int64", 2))
    cat, sizes = L.tensor_array_to_tensor(arr, axis=0)
    stacked, _ = L.tensor_array_to_tensor(arr, axis=1, use_stack=True)
    loss = L.reduce_mean(cat * cat) + L.reduce_sum(last)
    gx, = fluid.gradients(loss, [x])
    # (not i: fluid's backward runs the body's increments in reverse, so after it i is 0)
    return {"x": X23}, [length, last, cat, sizes, stacked, loss, gx]


def while_loop_grad(fluid):
    """while_loop carrying h = tanh(h W + b) four times: values and gradients. The loop's
    initial value is fed (as fluid's own tests do): where an op computes it, fluid 1.8.5's
    gradients are wrong (zero for it, partial for w and b: see test_control_flow.py)."""
    L = fluid.layers
    x = _data(fluid, "x", X23)
    w, b = _param(fluid, "w", W33), _param(fluid, "b", B3)
    i = L.fill_constant([1], "int64", 0)
    n = L.fill_constant([1], "int64", 4)

    def body(i, h):
        return [i + 1, L.tanh(L.elementwise_add(L.matmul(h, w), b))]

    i, h = L.while_loop(lambda i, h: L.less_than(i, n), body, [i, x])
    loss = L.reduce_mean(h * h)
    grads = fluid.gradients(loss, [x, w, b])
    return {"x": X23}, [i, h, loss] + grads


def cond_grad(fluid):
    """cond taken both ways, nested cond, gradients through the branch that ran."""
    L = fluid.layers
    x = _data(fluid, "x", X23)
    w = _param(fluid, "w", W33)
    a = fluid.data("a", [1], "float32")
    zero = L.fill_constant([1], "float32", 0.0)
    pred = L.less_than(a, zero)
    y = L.cond(pred, lambda: L.matmul(x, w), lambda: L.tanh(x) * 3.0)
    z = L.cond(L.logical_not(pred),
               lambda: L.cond(pred, lambda: x * 0.0, lambda: L.exp(x)),
               lambda: x - 1.0)
    loss = L.reduce_mean(y * y) + L.reduce_sum(z)
    gx, gw = fluid.gradients(loss, [x, w])
    return [{"x": X23, "a": np.array([-1.0], "float32")},
            {"x": X23, "a": np.array([2.0], "float32")}], [y, z, loss, gx, gw]


def case_switch_case(fluid):
    L = fluid.layers
    x = _data(fluid, "x", X23)
    k = fluid.data("k", [1], "int64")
    one = L.fill_constant([1], "int64", 1)
    two = L.fill_constant([1], "int64", 2)
    c = L.case([(L.equal(k, one), lambda: x * 2.0), (L.equal(k, two), lambda: x + 10.0)],
               default=lambda: L.sin(x))
    c2 = L.case([(L.less_than(k, one), lambda: x * 5.0), (L.less_than(k, two), lambda: x)])
    s = L.switch_case(k, {1: lambda: x * 3.0, 3: lambda: L.cos(x)}, default=lambda: -x)
    s2 = L.switch_case(L.cast(k, "int32"), [lambda: x + 1.0, lambda: x + 2.0,
                                             lambda: x + 3.0])
    loss = L.reduce_sum(c * s) + L.reduce_sum(c2 + s2)
    gx, = fluid.gradients(loss, [x])
    feeds = [{"x": X23, "k": np.array([v], "int64")} for v in (0, 1, 2, 3)]
    return feeds, [c, c2, s, s2, loss, gx]


def switch_lr(fluid):
    """Switch assigning a global variable, as learning-rate schedules do."""
    L = fluid.layers
    step = fluid.data("step", [1], "float32")
    lr = L.create_global_var([1], 0.5, "float32", persistable=True, name="lr")
    with L.Switch() as switch:
        with switch.case(L.less_than(step, L.fill_constant([1], "float32", 3.0))):
            L.assign(L.fill_constant([1], "float32", 0.1), lr)
        with switch.case(L.less_than(step, L.fill_constant([1], "float32", 6.0))):
            L.assign(step * 0.01, lr)
        with switch.default():
            L.assign(L.fill_constant([1], "float32", 0.001), lr)
    return [{"step": np.array([v], "float32")} for v in (1.0, 4.0, 9.0)], [lr]


def ifelse_rows(fluid):
    """IfElse over rows: x * w where x[:, 0] > 0, else x - 1; merged back; gradients."""
    L = fluid.layers
    x = _data(fluid, "x", ROWS)
    w = _param(fluid, "w", W33)
    first = L.slice(x, axes=[1], starts=[0], ends=[1])
    mask = L.greater_than(first, L.fill_constant([5, 1], "float32", 0.0))
    ie = L.IfElse(mask)
    with ie.true_block():
        d = ie.input(x)
        ie.output(L.matmul(d, w))
    with ie.false_block():
        d = ie.input(x)
        ie.output(d - 1.0)
    out, = ie()
    loss = L.reduce_mean(out * out)
    gx, gw = fluid.gradients(loss, [x, w])
    return {"x": ROWS}, [out, loss, gx, gw]


def static_rnn(fluid):
    """StaticRNN: h_t = tanh(x_t Wx + h_{t-1} Wh), h_0 = 0 (memory from shape/batch_ref)."""
    L = fluid.layers
    x = _data(fluid, "x", SEQ)
    wx, wh = _param(fluid, "wx", WX), _param(fluid, "wh", WH)
    rnn = L.StaticRNN()
    with rnn.step():
        word = rnn.step_input(x)
        prev = rnn.memory(shape=[-1, 5], batch_ref=word)
        hidden = L.tanh(L.matmul(word, wx) + L.matmul(prev, wh))
        rnn.update_memory(prev, hidden)
        rnn.step_output(hidden)
    out = rnn()
    loss = L.reduce_mean(out * out)
    grads = fluid.gradients(loss, [x, wx, wh])
    return {"x": SEQ}, [out, loss] + grads


def is_empty(fluid):
    L = fluid.layers
    x = fluid.data("x", [2, 3], "float32")
    e = fluid.data("e", [0, 3], "float32")  # (spmd refuses an empty batch: a fixed 0 dim)
    return {"x": X23, "e": np.zeros((0, 3), "float32")}, [L.is_empty(x), L.is_empty(e)]


CASES = {f.__name__: f for f in (while_arrays, while_loop_grad, cond_grad, case_switch_case,
                                 switch_lr, ifelse_rows, static_rnn, is_empty)}


def train_static_rnn(fluid):
    L = fluid.layers
    x = fluid.data("x", list(SEQ.shape), "float32")
    x.stop_gradient = False  # fluid 1.8's recurrent_grad needs a gradient for its inputs
    t = fluid.data("t", list(TARGET.shape), "float32")
    wx, wh = _param(fluid, "wx", WX), _param(fluid, "wh", WH)
    rnn = L.StaticRNN()
    with rnn.step():
        word = rnn.step_input(x)
        prev = rnn.memory(shape=[-1, 5], batch_ref=word)
        hidden = L.tanh(L.matmul(word, wx) + L.matmul(prev, wh))
        rnn.update_memory(prev, hidden)
        rnn.step_output(hidden)
    out = rnn()
    last = L.reshape(L.slice(out, axes=[0], starts=[3], ends=[4]), [2, 5])
    loss = L.reduce_mean(L.square(last - t))
    return {"x": SEQ, "t": TARGET}, loss


def train_while(fluid):
    L = fluid.layers
    h = fluid.data("x", list(X23.shape), "float32")
    h.stop_gradient = False  # fed, as in fluid's tests of While gradients (see while_loop_grad)
    t = fluid.data("t", [2, 3], "float32")
    w, b = _param(fluid, "w", W33), _param(fluid, "b", B3)
    i = L.fill_constant([1], "int64", 0)
    n = L.fill_constant([1], "int64", 3)
    c = L.less_than(i, n)
    loop = L.While(c)
    with loop.block():
        L.assign(L.tanh(L.elementwise_add(L.matmul(h, w), b)), h)
        L.increment(i, 1, in_place=True)
        L.less_than(i, n, cond=c)
    loss = L.reduce_mean(L.square(h - t))
    return {"x": X23, "t": X23[::-1] * 0.5}, loss


TRAIN_CASES = {f.__name__: f for f in (train_static_rnn, train_while)}


def run_case(fluid, name):
    """The case's fetches (for each of its feeds)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        feeds, fetches = CASES[name](fluid)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    runs = feeds if isinstance(feeds, list) else [feeds]
    return [[np.asarray(v) for v in exe.run(main, feed=f, fetch_list=fetches, scope=scope)]
            for f in runs]


def run_training(fluid, name, steps=4, lr=0.1):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        feed, loss = TRAIN_CASES[name](fluid)
        fluid.optimizer.SGD(learning_rate=lr).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    return [float(np.asarray(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])
                  .reshape(-1)[0]) for _ in range(steps)]


def main():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import paddle
    import paddle.fluid as fluid
    from oracle_io import save

    cases = {name: run_case(fluid, name) for name in CASES}
    cases.update({name: run_training(fluid, name) for name in TRAIN_CASES})
    save("control_flow", cases, {"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
