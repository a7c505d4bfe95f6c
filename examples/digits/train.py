"""Train an MLP (or CNN) on scikit-learn's bundled digits, data-parallel over however many
processes run it, and report the test accuracy on rank 0.

    python examples/digits/train.py [--model mlp|cnn] [--epochs 20]      # one process
    mpiexec -n 2 python examples/digits/train.py                         # two ranks
    paddle-launch --nproc_per_node 2 examples/digits/train.py

Every rank builds the same program and takes its 1/N of each global batch; gradients are
averaged across ranks, so N ranks train exactly what one process on the whole batch trains.
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
from spmd.comm.topology import detect  # noqa: E402


def train(model="mlp", epochs=20, batch_size=64, learning_rate=0.01, log=print):
    """Train; return (per-epoch mean losses, final test accuracy). Rank 0 logs."""
    topology = detect()
    rank, size = topology.rank, topology.size
    x_train, y_train, x_test, y_test = load_digits_split()
    main, startup, test_program, loss, acc = build(model, learning_rate)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    program = main
    if size > 1:
        program = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    per_rank = batch_size // size
    losses = []
    for epoch in range(epochs):
        epoch_losses = []
        for xb, yb in batches(x_train, y_train, batch_size, epoch):
            shard = slice(rank * per_rank, (rank + 1) * per_rank)
            (value,) = exe.run(program, feed={"img": xb[shard], "label": yb[shard]},
                               fetch_list=[loss], scope=scope)
            epoch_losses.append(float(value[0]))
        losses.append(float(np.mean(epoch_losses)))
        if rank == 0:
            log(f"epoch {epoch:2d}  loss {losses[-1]:.4f}")
    (value,) = exe.run(test_program, feed={"img": x_test, "label": y_test}, fetch_list=[acc],
                       scope=scope)
    accuracy = float(value[0])
    if rank == 0:
        log(f"test accuracy {accuracy:.4f}" + (f"  ({size} ranks)" if size > 1 else ""))
    return losses, accuracy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    train(args.model, args.epochs)


if __name__ == "__main__":
    main()
