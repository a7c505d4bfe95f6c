"""The floor Reduce mode can reach: the communication and the SGD update of one step on the
bench MLP's gradients (784-512-512-10, float32), by hand in mpi4py and numpy, as AllReduce
mode does them and as a flat-partition Reduce mode would (issue 13, item 2).

- AllReduce: one in-place Allreduce of the fused gradient buffer, then SGD on every parameter.
- Flat Reduce: the same buffer cut into one equal section per rank; Reduce_scatter_block into
  this rank's section, SGD on its section of one flat parameter buffer (whose views are the
  parameters), then an in-place Allgather of the parameters. No packing, no slicing, no concat.

Interleaved rounds in one run; the ratio is the figure to quote. spmd's Reduce mode today (row
chunks with packed sections, slices and concats) is measured by bench/data_parallel.py.

    mpiexec -n 2 python bench/reduce_floor.py [--rounds 7] [--steps 50]
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from mlp import LR, SIZES  # noqa: E402


def shapes() -> list[tuple]:
    out = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        out += [(fan_in, fan_out), (fan_out,)]
    return out


def main():
    from mpi4py import MPI

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    comm, n = MPI.COMM_WORLD, MPI.COMM_WORLD.size
    sizes = [int(np.prod(s)) for s in shapes()]
    total = sum(sizes)
    section = -(-total // n)
    grads = np.random.default_rng(comm.rank).standard_normal(section * n).astype(np.float32)
    params = np.ones(section * n, np.float32)  # one flat buffer: the parameters are its views
    mine = np.empty(section, np.float32)
    lr = np.float32(LR)
    offsets = np.cumsum([0] + sizes)
    views = [(params[a:b].reshape(s), grads[a:b].reshape(s))
             for a, b, s in zip(offsets[:-1], offsets[1:], shapes())]

    def allreduce_mode():
        comm.Allreduce(MPI.IN_PLACE, grads[:total], op=MPI.SUM)
        for p, g in views:
            p -= lr * g

    def flat_reduce_mode():
        comm.Reduce_scatter_block(grads, mine, op=MPI.SUM)
        own = params[comm.rank * section:(comm.rank + 1) * section]
        own -= lr * mine
        comm.Allgather(MPI.IN_PLACE, params)

    times: dict[str, list] = {}
    for _ in range(args.rounds):
        for name, step in (("AllReduce", allreduce_mode), ("flat Reduce", flat_reduce_mode)):
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step()
            times.setdefault(name, []).append((time.perf_counter() - t0) / args.steps * 1e3)
    if comm.rank == 0:
        med = {k: float(np.median(v)) for k, v in times.items()}
        print(f"{n} ranks, {total * 4 / 1e6:.2f} MB of gradients, median of {args.rounds} "
              f"rounds x {args.steps} steps (comm + SGD only, ms/step):")
        print(f"| AllReduce | flat Reduce | ratio |\n|---|---|---|\n| {med['AllReduce']:.3f} | "
              f"{med['flat Reduce']:.3f} | **{med['flat Reduce'] / med['AllReduce']:.3f}** |")


if __name__ == "__main__":
    main()
