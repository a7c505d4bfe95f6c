"""A fluid data-parallel job for the env-only start tests (tests/launch/test_env_only_start.py):
each rank trains on its 1/N of a fixed global batch, rank 0 saves a checkpoint and every rank
loads it back, and the last line is the parameters' checksum, the same on every rank.

    mpiexec -n 2 python env_only_train.py [--reduce] [--fault raise|exit0|os_exit0]
    PADDLE_TRAINER_ID=0 PADDLE_TRAINERS_NUM=2 ... python env_only_train.py   # one per trainer
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import spmd.fluid as fluid

p = argparse.ArgumentParser()
p.add_argument("--reduce", action="store_true", help="BuildStrategy Reduce mode")
p.add_argument("--fault", choices=("none", "raise", "exit0", "os_exit0"), default="none",
               help="what the last trainer does before MPI starts")
p.add_argument("--who", type=int, default=-1, help="the trainer that misbehaves (-1: last)")
p.add_argument("--ckpt", default="")
p.add_argument("--steps", type=int, default=4)
args = p.parse_args()

trainer = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
trainers = int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))
if args.fault != "none" and trainer == args.who % trainers:
    if args.fault == "raise":
        raise FileNotFoundError(f"trainer {trainer}: no data file here (on purpose)")
    if args.fault == "exit0":
        sys.exit(0)
    os._exit(0)

from spmd.fleet import role_maker  # noqa: E402

role = role_maker.PaddleCloudRoleMaker(is_collective=True)
role.generate_role()
rank, size = role.worker_index(), role.worker_num()
main, startup = fluid.Program(), fluid.Program()
main.random_seed = startup.random_seed = 7
with fluid.program_guard(main, startup):
    x = fluid.data("x", [-1, 6], "float32")
    y = fluid.data("y", [-1, 1], "float32")
    h = fluid.layers.fc(x, 12, act="tanh")
    loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
    fluid.optimizer.SGD(0.1).minimize(loss)
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
strategy = fluid.BuildStrategy()
if args.reduce:
    strategy.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                          build_strategy=strategy)
rng = np.random.default_rng(0)
for step in range(args.steps):
    gx = rng.normal(size=(12, 6)).astype("float32")
    gy = np.sin(gx.sum(1, keepdims=True)).astype("float32")
    rows = slice(rank * 12 // size, (rank + 1) * 12 // size)
    value, = exe.run(compiled, feed={"x": gx[rows], "y": gy[rows]}, fetch_list=[loss])
    print(f"rank {rank}/{size} step {step} loss {float(np.asarray(value).mean()):.6f}",
          flush=True)
if args.ckpt:
    if rank == 0:
        fluid.io.save_persistables(exe, args.ckpt, main)
    role.barrier_worker()
    fluid.io.load_persistables(exe, args.ckpt, main)
scope = fluid.global_scope()
total = sum(float(np.asarray(scope.find_var(p.name).get_tensor()).sum())
            for p in main.global_block().all_parameters())
print(f"rank {rank}/{size} checksum {total:.6f}", flush=True)
