"""Train an MLP (or CNN) on scikit-learn's bundled digits and report test accuracy.

    python examples/digits/train.py [--model mlp|cnn] [--epochs 20]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data import batches, load_digits_split  # noqa: E402
from models import build  # noqa: E402

import spmd.fluid as fluid  # noqa: E402


def evaluate(exe, test_program, acc, x, y, scope):
    (value,) = exe.run(test_program, feed={"img": x, "label": y}, fetch_list=[acc], scope=scope)
    return float(value[0])


def train(model="mlp", epochs=20, batch_size=64, learning_rate=0.01, log=print):
    """Train and return (per-epoch mean losses, final test accuracy)."""
    x_train, y_train, x_test, y_test = load_digits_split()
    main, startup, test_program, loss, acc = build(model, learning_rate)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    losses = []
    for epoch in range(epochs):
        epoch_losses = [float(exe.run(main, feed={"img": xb, "label": yb}, fetch_list=[loss],
                                      scope=scope)[0][0])
                        for xb, yb in batches(x_train, y_train, batch_size, epoch)]
        losses.append(float(np.mean(epoch_losses)))
        log(f"epoch {epoch:2d}  loss {losses[-1]:.4f}")
    accuracy = evaluate(exe, test_program, acc, x_test, y_test, scope)
    log(f"test accuracy {accuracy:.4f}")
    return losses, accuracy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    train(args.model, args.epochs)


if __name__ == "__main__":
    main()
