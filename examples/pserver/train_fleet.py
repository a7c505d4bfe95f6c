"""The CTR-style job of train.py written with fluid 1.6-1.8's fleet API in parameter-server
mode (`fluid.incubate.fleet.parameter_server.distribute_transpiler`), as Paddle's model zoo
wrote its CTR and word2vec jobs: only the import lines differ from fluid 1.8.

The role comes from PaddleCloudRoleMaker, which reads what `paddle-launch --server_num N
--worker_num M` (or `mpiexec -n N+M paddle-launch --server_num N`) sets: TRAINING_ROLE,
PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ID, POD_IP and PADDLE_PORT.

    paddle-launch --server_num 2 --worker_num 2 examples/pserver/train_fleet.py [--mode async]
    (modes: sync, async, half_async, geo [--geo_every K])
"""
from __future__ import annotations

import argparse
import sys

from train import ctr_net, train_loop

import spmd.fluid as fluid  # fluid 1.x: import paddle.fluid as fluid
from spmd.fluid.incubate.fleet.base import role_maker
from spmd.fluid.incubate.fleet.parameter_server.distribute_transpiler import (
    distributed_strategy,
    fleet,
)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["sync", "async", "half_async", "geo"], default="sync",
                   help="StrategyFactory.create_<mode>_strategy()")
    p.add_argument("--geo_every", type=int, default=10,
                   help="geo mode: push the parameters' deltas every this many steps")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--log_every", type=int, default=20)
    p.add_argument("--save", help="trainer 0 saves the model here at the end "
                                  "(fleet.save_persistables)")
    args = p.parse_args(argv)

    fleet.init(role_maker.PaddleCloudRoleMaker())
    factory = distributed_strategy.StrategyFactory
    strategy = (factory.create_geo_strategy(args.geo_every) if args.mode == "geo" else
                getattr(factory, f"create_{args.mode}_strategy")())
    loss = ctr_net()
    optimizer = fleet.distributed_optimizer(fluid.optimizer.Adagrad(args.lr), strategy)
    optimizer.minimize(loss)

    if fleet.is_server():
        endpoint = fleet.server_endpoints()[fleet.server_index()]
        fleet.init_server()
        print(f"pserver {endpoint}: serving ({args.mode} mode, {fleet.worker_num()} trainers)",
              flush=True)
        fleet.run_server()  # returns once every trainer called fleet.stop_worker()
        print(f"pserver {endpoint}: done", flush=True)
        return 0

    fleet.init_worker()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fleet.startup_program)  # the parameters come from the pservers
    train_loop(exe, fleet.main_program, loss, args, fleet.worker_index(), fleet.worker_num())
    if args.save and fleet.is_first_worker():
        fleet.save_persistables(exe, args.save)
    fleet.stop_worker()
    return 0


if __name__ == "__main__":
    sys.exit(main())
