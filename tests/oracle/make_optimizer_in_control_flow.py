"""fluid 1.8's optimizer inside control flow: Paddle's test_optimizer_in_control_flow.py static()
program (an fc net whose loss a layers.case minimizes with Adam on even steps and SGD on odd
ones, the loss computed inside the branches or before them), at a smaller size, for
tests/unit/test_optimizer_in_control_flow.py. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_optimizer_in_control_flow.py

build(fluid, loss_in_switch) -> (main, startup, fetch list); run(fluid, ...) trains EPOCHS steps
on DATA and returns, per step, the fetched hidden, prediction and loss, then the parameters.
"""
import os
import sys

import numpy as np

BATCH, INPUT, CLASSES, HIDDEN, EPOCHS, LR = 2, 12, 4, 5, 6, 0.01
_R = np.random.RandomState(2020)
DATA = [(_R.random_sample((BATCH, INPUT)).astype("float32"),
         _R.randint(0, CLASSES, (BATCH, 1)).astype("int64")) for _ in range(EPOCHS)]
# random weights (Paddle's test uses constants: every hidden unit then gets the same update, and
# the hidden layer's gradient, exactly zero through a uniform softmax, is rounding noise that
# Adam's first step magnifies to a full step, so no two implementations agree on it)
W_HIDDEN = _R.uniform(-0.3, 0.3, (INPUT, HIDDEN)).astype("float32")
W_PREDICTION = _R.uniform(-0.5, 0.5, (HIDDEN, CLASSES)).astype("float32")
PARAMS = ["hidden.w_0", "hidden.b_0", "prediction.w_0", "prediction.b_0"]


def build(fluid, loss_in_switch):
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        def fc(x, size, act, w, b, name):
            return L.fc(x, size=size, act=act, name=name,
                        param_attr=fluid.ParamAttr(
                            initializer=fluid.initializer.NumpyArrayInitializer(w)),
                        bias_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(b)))

        image = fluid.data("image", [BATCH, INPUT], "float32")
        label = fluid.data("label", [BATCH, 1], "int64")
        hidden = fc(image, HIDDEN, "relu", W_HIDDEN, 0.05, "hidden")
        prediction = fc(hidden, CLASSES, "softmax", W_PREDICTION, 0.08, "prediction")
        adam = fluid.optimizer.Adam(learning_rate=LR)
        sgd = fluid.optimizer.SGD(learning_rate=LR * 10)
        step = fluid.data("id", [1], "int32")
        even = L.elementwise_mod(step, L.fill_constant([1], "int32", 2)) == 0

        def fn_1(opt, avg_loss=None):
            if avg_loss is None:
                avg_loss = L.mean(L.cross_entropy(input=prediction, label=label))
            opt.minimize(avg_loss)
            return avg_loss

        def fn_2(opt, avg_loss=None):
            if avg_loss is None:
                avg_loss = L.mean(L.softmax_with_cross_entropy(logits=prediction, label=label))
            opt.minimize(avg_loss)
            return avg_loss

        if loss_in_switch:
            avg_loss = L.case([(even, lambda: fn_1(adam))], lambda: fn_2(sgd))
        else:
            loss_1 = L.mean(L.cross_entropy(input=prediction, label=label))
            loss_2 = L.mean(L.softmax_with_cross_entropy(logits=prediction, label=label))
            avg_loss = L.case([(even, lambda: fn_1(adam, loss_1))], lambda: fn_2(sgd, loss_2))
    return main, startup, [hidden, prediction, avg_loss]


def run(fluid, loss_in_switch):
    main, startup, fetch = build(fluid, loss_in_switch)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    steps = []
    for epoch, (image, label) in enumerate(DATA):
        feed = {"image": image, "label": label, "id": np.array([epoch]).astype("int32")}
        steps.append([np.array(v) for v in exe.run(main, feed=feed, fetch_list=fetch,
                                                      scope=scope)])
    params = {n: np.array(scope.find_var(n).get_tensor()) for n in PARAMS}
    return {"steps": steps, "params": params}


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save
    out = {"loss_in_switch": run(fluid, True), "loss_before_switch": run(fluid, False)}
    save("optimizer_in_control_flow", out, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
