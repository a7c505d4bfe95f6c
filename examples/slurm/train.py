"""Data-parallel least squares over MPI: each rank fits its own shard, gradients are averaged
with spmd's MPI communicator every step. Runs the same under every launcher:

    python examples/slurm/train.py                       # one process
    mpiexec -n 2 python examples/slurm/train.py
    srun --mpi=pmi2 -n 2 python examples/slurm/train.py
    paddle-launch --nproc_per_node 2 examples/slurm/train.py

Each rank prints `rank r/n step s loss L`, then `rank r/n trained: loss A -> B`.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from spmd.comm import SelfCommunicator, detect


def communicator():
    """MPI's world when an MPI launcher started this process; else a world of one."""
    topology = detect()
    if not topology.uses_mpi:
        tasks = int(os.environ.get("SLURM_NTASKS", "1"))
        if "SLURM_PROCID" in os.environ and "SLURM_STEP_ID" in os.environ and tasks > 1:
            # srun without PMI starts N independent copies that would each train alone.
            raise SystemExit(f"srun started {tasks} tasks without MPI's PMI: run "
                             f"`srun --mpi=pmi2 ...` (or set MpiDefault=pmi2 in slurm.conf)")
        return SelfCommunicator()
    from spmd.comm.mpi import MPICommunicator

    return MPICommunicator()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    comm = communicator()
    true_w = np.array([1.0, -2.0, 0.5, 3.0])
    rng = np.random.default_rng(1234 + comm.rank)  # each rank its own shard of the data
    x = rng.normal(size=(256, 4))
    y = x @ true_w + 0.01 * rng.normal(size=256)
    w = np.zeros(4)
    losses = []
    for step in range(args.steps):
        loss = np.array([np.mean((x @ w - y) ** 2)])
        grad = 2 * x.T @ (x @ w - y) / len(x)
        comm.allreduce(grad)  # sum over ranks, in place
        comm.allreduce(loss)
        grad /= comm.size
        losses.append(float(loss[0]) / comm.size)
        w -= args.lr * grad
        print(f"rank {comm.rank}/{comm.size} step {step} loss {losses[-1]:.6f}", flush=True)
    print(f"rank {comm.rank}/{comm.size} trained: loss {losses[0]:.6f} -> {losses[-1]:.6f}",
          flush=True)


if __name__ == "__main__":
    main()
