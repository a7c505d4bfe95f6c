"""The two digits models: an MLP and a small CNN, written as a fluid 1.8 user writes them."""
from __future__ import annotations

import spmd.fluid as fluid


def mlp(img, hidden=(128, 64)):
    h = img
    for size in hidden:
        h = fluid.layers.fc(h, size, act="relu")
    return fluid.layers.fc(h, 10)


def cnn(img):
    x = fluid.layers.reshape(img, [-1, 1, 8, 8])
    x = fluid.layers.conv2d(x, num_filters=16, filter_size=3, padding=1, act="relu")
    x = fluid.layers.pool2d(x, pool_size=2, pool_type="max", pool_stride=2)
    x = fluid.layers.conv2d(x, num_filters=32, filter_size=3, padding=1, act="relu")
    x = fluid.layers.pool2d(x, pool_size=2, pool_type="max", pool_stride=2)
    return fluid.layers.fc(x, 10)


def build(model: str = "mlp", learning_rate: float = 0.01, seed: int = 1):
    """Return (main, startup, test_program, loss, acc) for `model` in {"mlp", "cnn"}."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.data("img", [None, 64], "float32")
        label = fluid.data("label", [None, 1], "int64")
        logits = {"mlp": mlp, "cnn": cnn}[model](img)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        acc = fluid.layers.accuracy(fluid.layers.softmax(logits), label)
        test_program = main.clone(for_test=True)
        fluid.optimizer.Adam(learning_rate=learning_rate).minimize(loss)
    return main, startup, test_program, loss, acc
