"""A small training loop over spmd.comm for the launch tests: each step, every rank allreduces
its gradient of a least-squares fit; --mode makes one rank fail at --step.

    python -m spmd.run crash.py --mode raise --rank -1 --step 2
"""
from __future__ import annotations

import argparse
import os
import signal
import time

import numpy as np

from spmd.comm.mpi import MPICommunicator


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["ok", "raise", "kill", "hang", "exit", "abort"],
                   default="ok")
    p.add_argument("--rank", type=int, default=0, help="the failing rank; -1: the last")
    p.add_argument("--step", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--token", default="", help="marks this test's processes; unused here")
    args = p.parse_args()
    comm = MPICommunicator()
    bad_rank = args.rank % comm.size
    rng = np.random.default_rng(comm.rank)
    x = rng.normal(size=(64, 4))
    y = x @ np.array([1.0, -2.0, 0.5, 3.0])
    w = np.zeros(4)
    for step in range(args.steps):
        if step == args.step and comm.rank == bad_rank:
            if args.mode == "raise":
                raise ZeroDivisionError(f"rank {comm.rank} failed on purpose at step {step}")
            if args.mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if args.mode == "exit":
                raise SystemExit(3)
            if args.mode == "hang":
                time.sleep(600)
            if args.mode == "abort":  # what a library does on a fatal error
                from mpi4py import MPI

                MPI.COMM_WORLD.Abort(4)
        grad = comm.allreduce(2 * x.T @ (x @ w - y) / len(x)) / comm.size
        w -= 0.1 * grad
        loss = float(np.mean((x @ w - y) ** 2))
        print(f"rank {comm.rank}/{comm.size} step {step} loss {loss:.4f}", flush=True)
        time.sleep(0.05)
    print(f"rank {comm.rank}/{comm.size} done", flush=True)


if __name__ == "__main__":
    main()
