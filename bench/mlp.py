"""The benchmark model, shared by bench/step.py and bench/data_parallel.py: MLP 784-512-512-10,
ReLU, softmax cross-entropy, float32, as a spmd program and as the same step hand-written in
numpy. Import it after the script set the BLAS thread variables."""
from __future__ import annotations

import os
import time

import numpy as np

import spmd.fluid as fluid

SIZES = (784, 512, 512, 10)
BATCH, LR = 128, 0.01


def build(opt: str = "sgd"):
    """(main, startup, loss) of the MLP with SGD (or Adam), parameters fc_0..fc_2."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, SIZES[0]], "float32")
        y = fluid.data("y", [None, 1], "int64")
        h = x
        for size in SIZES[1:-1]:
            h = fluid.layers.fc(h, size, act="relu")
        logits = fluid.layers.fc(h, SIZES[-1])
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        (fluid.optimizer.SGD(LR) if opt == "sgd" else fluid.optimizer.Adam(LR)).minimize(loss)
    return main, startup, loss


def params_of(scope) -> list:
    """[(w, b)] per layer, copied out of `scope`, for the numpy reference to update in place."""
    return [(np.array(scope.find_var(f"fc_{i}.w_0").get_tensor()),
             np.array(scope.find_var(f"fc_{i}.b_0").get_tensor())) for i in range(3)]


def numpy_grads(params, x, y, batch_total: int):
    """The loss and [dw1, db1, dw2, db2, dw3, db3] by hand; the loss gradient is divided by
    `batch_total` (the global batch, when ranks split it)."""
    (w1, b1), (w2, b2), (w3, b3) = params
    h1 = np.maximum(x @ w1 + b1, 0)
    h2 = np.maximum(h1 @ w2 + b2, 0)
    logits = h2 @ w3 + b3
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    loss = -np.log(p[rows, y[:, 0]]).mean()
    d3 = p
    d3[rows, y[:, 0]] -= 1
    d3 /= batch_total
    d2 = (d3 @ w3.T) * (h2 > 0)
    d1 = (d2 @ w2.T) * (h1 > 0)
    return loss, [x.T @ d1, d1.sum(0), h1.T @ d2, d2.sum(0), h2.T @ d3, d3.sum(0)]


def sgd(params, grads):
    for param, grad in zip((p for pair in params for p in pair), grads):
        param -= LR * grad


def timed(fn, steps: int) -> float:
    """Seconds per call over `steps` calls."""
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - t0) / steps


def write_report(text: str, out: str | None):
    print(text)
    if out:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w") as f:
            f.write(text + "\n")
