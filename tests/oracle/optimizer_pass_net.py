"""The net and optimizers of tests/oracle/make_optimizer_pass.py, built on the `fluid` given
(real fluid 1.8.5 for the oracle, spmd.fluid for the test), so both run the same script."""
import numpy as np

OPTIMIZERS = ["sgd", "momentum", "adagrad", "adam", "adamax", "decayed_adagrad", "ftrl",
              "rmsprop", "adadelta", "lamb", "lars_momentum", "dpsgd"]


def make(fluid, name):
    o = fluid.optimizer
    return {
        "sgd": lambda: o.SGD(learning_rate=0.1),
        "momentum": lambda: o.Momentum(learning_rate=0.1, momentum=0.9),
        "adagrad": lambda: o.Adagrad(learning_rate=0.1),
        "adam": lambda: o.Adam(learning_rate=0.1),
        "adamax": lambda: o.Adamax(learning_rate=0.1),
        "decayed_adagrad": lambda: o.DecayedAdagrad(learning_rate=0.1),
        "ftrl": lambda: o.Ftrl(learning_rate=0.1),
        "rmsprop": lambda: o.RMSProp(learning_rate=0.1),
        "adadelta": lambda: o.Adadelta(learning_rate=0.1),
        "lamb": lambda: o.Lamb(learning_rate=0.1),
        "lars_momentum": lambda: o.LarsMomentum(learning_rate=0.1, momentum=0.9),
        # sigma 0: no noise (fluid seeds it from the clock), the clipped update alone
        "dpsgd": lambda: o.Dpsgd(learning_rate=0.1, clip=0.05, batch_size=4.0, sigma=0.0),
    }[name]()


def run_case(fluid, name):
    """(returned op types, {accumulator: sorted param names}, {param: value after 2 steps})."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        h = fluid.layers.fc(x, size=3, act="tanh",
                            param_attr=fluid.ParamAttr(name="w1", learning_rate=1.1),
                            bias_attr=fluid.ParamAttr(name="b1"))
        y = fluid.layers.fc(h, size=2, param_attr=fluid.ParamAttr(name="w2"),
                            bias_attr=False)
        loss = fluid.layers.reduce_mean(fluid.layers.square(y))
        opt = make(fluid, name)
        ops, _ = opt.minimize(loss)
    accs = {k: sorted(v) for k, v in opt._accumulators.items()}
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        for p in ["w1", "b1", "w2"]:
            t = scope.find_var(p).get_tensor()
            shape = np.array(t).shape
            n = int(np.prod(shape))
            t.set((np.cos(np.arange(n) * 0.9 + len(p)) * 0.5).astype("float32").reshape(shape),
                  fluid.CPUPlace())
        xs = np.linspace(-1, 1, 12).astype("float32").reshape(3, 4)
        for _ in range(2):
            exe.run(main, feed={"x": xs}, fetch_list=[loss])
        params = {p: np.array(scope.find_var(p).get_tensor()) for p in ["w1", "b1", "w2"]}
    return [op.type for op in ops], accs, params
