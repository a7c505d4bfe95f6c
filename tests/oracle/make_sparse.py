"""Reference outputs of fluid 1.8.5 for sparse embeddings (embedding(is_sparse=True)), read by
tests/unit/test_sparse_oracle.py:

- "train/<optimizer>": two embedding tables with fixed values (one looked up twice, so its
  sparse gradients are summed), an fc on top, trained 3 steps with each optimizer that
  takes SelectedRows gradients in fluid 1.8 (SGD, Momentum, Adam, lazy Adam, Adagrad, Ftrl),
  with and without is_sparse: the losses and the final parameters, or fluid's error (1.8.5's
  ftrl op refuses SelectedRows gradients; spmd's applies them to the looked-up rows). 1.8.5's
  sparse momentum and adam differ from its dense ones (see tests/unit/test_sparse_oracle.py);
  spmd's sparse updates give the dense result.

Run with the oracle's Python from outside the checkout:
    cd /tmp && /tmp/pd18/bin/python /work/main/tests/oracle/make_sparse.py
"""
import os
import sys

import numpy as np

try:
    import paddle.fluid as fluid
except ImportError:  # imported by the spmd tests for its constants only
    fluid = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

VOCAB, DIM, STEPS = 10, 3, 3
IDS = [np.array([[1], [4], [1], [7]], "int64"), np.array([[4], [0], [0], [9]], "int64"),
       np.array([[2], [1], [8], [4]], "int64")]
Y = [np.array([[0.5], [-0.2], [0.1], [0.3]], "float32")] * STEPS

OPTIMIZERS = {
    "sgd": lambda: fluid.optimizer.SGD(0.3),
    "momentum": lambda: fluid.optimizer.Momentum(0.2, momentum=0.9),
    "adam": lambda: fluid.optimizer.Adam(0.1),
    "lazy_adam": lambda: fluid.optimizer.Adam(0.1, lazy_mode=True),
    "adagrad": lambda: fluid.optimizer.Adagrad(0.3),
    "ftrl": lambda: fluid.optimizer.Ftrl(0.3, l1=0.01, l2=0.01),
}


def init(shape, offset):
    n = int(np.prod(shape))
    return (np.sin(np.arange(n) * 0.7 + offset) * 0.5).astype("float32").reshape(shape)


def attr(name, shape, offset):
    return fluid.ParamAttr(name=name, initializer=fluid.initializer.NumpyArrayInitializer(
        init(shape, offset)))


def train(opt, is_sparse):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        a = fluid.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=is_sparse,
                                   param_attr=attr("table_a", [VOCAB, DIM], 0))
        b1 = fluid.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=is_sparse,
                                    param_attr=attr("table_b", [VOCAB, DIM], 1))
        b2 = fluid.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=is_sparse,
                                    param_attr="table_b")
        h = fluid.layers.concat([a, b1 * b2], axis=1)
        pred = fluid.layers.fc(h, 1, param_attr=attr("fc_w", [2 * DIM, 1], 2),
                               bias_attr=attr("fc_b", [1], 3))
        loss = fluid.layers.reduce_mean(fluid.layers.square(pred - y))
        OPTIMIZERS[opt]().minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for ids_v, y_v in zip(IDS, Y):
        out, = exe.run(main, feed={"ids": ids_v, "y": y_v}, fetch_list=[loss], scope=scope)
        losses.append(float(np.array(out).reshape(-1)[0]))
    params = {n: np.array(scope.find_var(n).get_tensor())
              for n in ("table_a", "table_b", "fc_w", "fc_b")}
    return {"losses": losses, "params": params}


def main():
    cases = {}
    for opt in OPTIMIZERS:
        for sparse in (True, False):
            key = "train/{}/{}".format(opt, "sparse" if sparse else "dense")
            try:
                cases[key] = train(opt, sparse)
            except Exception as e:  # noqa: BLE001 - 1.8.5's ftrl refuses SelectedRows
                cases[key] = {"error": str(e).strip().splitlines()[-1][:300]}
    save("sparse", cases)


if __name__ == "__main__":
    main()
