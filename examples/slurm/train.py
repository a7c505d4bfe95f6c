"""Data-parallel linear regression written as a fluid user writes it: every rank builds the same
program, feeds its own shard of the data, and CompiledProgram.with_data_parallel averages the
gradients across ranks every step. Runs the same under every launcher:

    python examples/slurm/train.py                       # one process
    mpiexec -n 2 python examples/slurm/train.py
    srun --mpi=pmi2 -n 2 python examples/slurm/train.py
    paddle-launch --nproc_per_node 2 examples/slurm/train.py

Each rank prints `rank r/n step s loss L` (the loss on its shard), then
`rank r/n trained: loss A -> B`.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

import spmd.fluid as fluid
from spmd.comm import detect


def check_launch():
    """srun without MPI's PMI starts N independent copies that would each train alone."""
    tasks = int(os.environ.get("SLURM_NTASKS", "1"))
    if (not detect().uses_mpi and "SLURM_PROCID" in os.environ
            and "SLURM_STEP_ID" in os.environ and tasks > 1):
        raise SystemExit(f"srun started {tasks} tasks without MPI's PMI: run "
                         f"`srun --mpi=pmi2 ...` (or set MpiDefault=pmi2 in slurm.conf)")


def build(lr: float):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float64")
        y = fluid.data("y", [None, 1], "float64")
        pred = fluid.layers.fc(x, 1, bias_attr=False,
                               param_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(0)))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.SGD(learning_rate=lr).minimize(loss)
    return main, startup, loss


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    check_launch()
    topology = detect()
    rank, size = topology.rank, topology.size
    true_w = np.array([[1.0], [-2.0], [0.5], [3.0]])
    rng = np.random.default_rng(1234 + rank)  # each rank its own shard of the data
    x = rng.normal(size=(256, 4))
    y = x @ true_w + 0.01 * rng.normal(size=(256, 1))

    main_program, startup, loss = build(args.lr)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    program = fluid.CompiledProgram(main_program).with_data_parallel(loss_name=loss.name)
    losses = []
    for step in range(args.steps):
        (value,) = exe.run(program, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)
        losses.append(float(value[0]))
        print(f"rank {rank}/{size} step {step} loss {losses[-1]:.6f}", flush=True)
    print(f"rank {rank}/{size} trained: loss {losses[0]:.6f} -> {losses[-1]:.6f}", flush=True)


if __name__ == "__main__":
    main()
