"""One rank leaves before the job's first collective (--how: exit0 sys.exit(0), os_exit0
os._exit(0), exit3 sys.exit(3), raise an exception); the others then start MPI and allreduce.

    paddle-launch --nproc_per_node 2 early_exit.py --how exit0 --rank 1
"""
from __future__ import annotations

import argparse
import os
import sys

import spmd  # noqa: F401 - as a training script starts: the guard is armed at import


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--how", choices=["exit0", "os_exit0", "exit3", "raise"], required=True)
    p.add_argument("--rank", type=int, default=1)
    p.add_argument("--token", default="", help="marks this test's processes; unused here")
    args = p.parse_args()
    rank = int(os.environ.get("PADDLE_TRAINER_ID") or os.environ.get("PMI_RANK") or 0)
    if rank == args.rank:
        if args.how == "exit0":
            sys.exit(0)
        if args.how == "os_exit0":
            os._exit(0)
        if args.how == "exit3":
            sys.exit(3)
        raise FileNotFoundError(f"rank {rank}: data file train.txt not found")
    import numpy as np

    from spmd.comm.mpi import MPICommunicator

    comm = MPICommunicator()
    print(f"rank {comm.rank} sum {comm.allreduce(np.ones(2))}", flush=True)


if __name__ == "__main__":
    main()
