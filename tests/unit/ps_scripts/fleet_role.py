"""One role of a parameter-server job written with fluid 1.8's fleet
(`fluid.incubate.fleet.parameter_server.distribute_transpiler`), on ps_role.py's models: the
role from PaddleCloudRoleMaker (TRAINING_ROLE, PADDLE_PSERVERS_IP_PORT_LIST,
PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ID, POD_IP and PADDLE_PORT) or, with --user-defined, a
UserDefinedRoleMaker built from the same variables. `--out`, `--init-seed` as in ps_role.py
(a server also writes `--out`.init.npz after init_server). `--save DIR`: trainer 0
calls fleet.save_persistables(exe, DIR) after its last step; `--restore DIR`: each server
calls fleet.init_server(DIR). PS_ROLE_FLUID=paddle runs it in real fluid 1.8.5.

    TRAINING_ROLE=PSERVER POD_IP=127.0.0.1 PADDLE_PORT=6170 ... \\
        python fleet_role.py --mode sync --opt sgd --steps 4 --out ps0.npz
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import ps_role
from ps_role import batches, build, persistables, set_blocks, shard

if os.environ.get("PS_ROLE_FLUID") == "paddle":
    import paddle.fluid as fluid
    from paddle.fluid.incubate.fleet.base import role_maker
    from paddle.fluid.incubate.fleet.parameter_server.distribute_transpiler import fleet
    from paddle.fluid.incubate.fleet.parameter_server.distribute_transpiler.\
        distributed_strategy import StrategyFactory
else:
    from spmd.fluid.incubate.fleet.parameter_server.distribute_transpiler.\
            distributed_strategy import StrategyFactory

    import spmd.fluid as fluid
    from spmd.fluid.incubate.fleet.base import role_maker
    from spmd.fluid.incubate.fleet.parameter_server.distribute_transpiler import fleet


def make_role(user_defined: bool):
    if not user_defined:
        return role_maker.PaddleCloudRoleMaker()
    servers = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")
    workers = int(os.environ["PADDLE_TRAINERS_NUM"])
    if os.environ["TRAINING_ROLE"] == "PSERVER":
        me = f"{os.environ['POD_IP']}:{os.environ['PADDLE_PORT']}"
        return role_maker.UserDefinedRoleMaker(servers.index(me), role_maker.Role.SERVER,
                                               workers, servers)
    return role_maker.UserDefinedRoleMaker(int(os.environ["PADDLE_TRAINER_ID"]),
                                           role_maker.Role.WORKER, workers, servers)


def strategy_of(mode: str):
    if mode == "config-sync":  # a DistributeTranspilerConfig, as fluid 1.6's scripts pass
        config = fluid.DistributeTranspilerConfig()
        config.sync_mode = True
        return config
    return getattr(StrategyFactory, f"create_{mode}_strategy")()


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mixed")
    p.add_argument("--opt", default="sgd")
    p.add_argument("--decay", action="store_true")
    p.add_argument("--mode", default="sync",
                   choices=["sync", "async", "half_async", "config-sync"])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--out", required=True)
    p.add_argument("--init-seed", type=int)
    p.add_argument("--user-defined", action="store_true")
    p.add_argument("--save")
    p.add_argument("--restore")
    args = p.parse_args(argv)

    fleet.init(make_role(args.user_defined))
    strategy = strategy_of(args.mode)
    _, _, loss = build(args.model, args.opt, args.decay,
                       wrap=lambda opt: fleet.distributed_optimizer(opt, strategy))
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.global_scope()
    if fleet.is_server():
        fleet.init_server(args.restore)
        if args.init_seed is not None:
            set_blocks(fleet.main_program, scope, ps_role.seeded_init(args.init_seed),
                       fleet.server_num())
        np.savez(args.out + ".init.npz", **persistables(fleet.main_program, scope))
        fleet.run_server()
        np.savez(args.out, **persistables(fleet.main_program, scope))
        return 0
    fleet.init_worker()
    exe.run(fleet.startup_program)
    trainer_id, trainers = fleet.worker_index(), fleet.worker_num()
    losses = [float(np.asarray(exe.run(fleet.main_program, feed=shard(feed, trainer_id, trainers),
                                       fetch_list=[loss])[0]).reshape(-1)[0])
              for feed in batches(args.model, args.steps)]
    if args.save and fleet.is_first_worker():
        fleet.save_persistables(exe, args.save)
    fleet.stop_worker()
    np.savez(args.out, losses=np.array(losses), **persistables(fleet.main_program, scope))
    return 0


if __name__ == "__main__":
    sys.exit(main())
