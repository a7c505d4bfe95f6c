"""One role of a parameter-server job, written as the seed's DistributeTranspiler example:
the role from PADDLE_TRAINING_ROLE (PSERVER / TRAINER, or LOCAL: one process, no
transpiler), the pservers from PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM,
PADDLE_TRAINER_ID, PADDLE_CURRENT_ENDPOINT. `--out` gets an .npz of what the role ends with
(a pserver also its values after its startup in `--out`.init.npz); with `--init` (an .npz of
whole parameters) LOCAL starts from them and each pserver sets its blocks of them after its
startup; `--init-seed S` gives them seeded_init(S) instead. PS_ROLE_FLUID=paddle runs it in
real fluid 1.8.5 (tests/oracle/make_pserver.py).

Models: "mixed" (a sparse embedding of 2048 rows and an fc weight, both cut across 2
pservers, then a small fc; SGD or Adam, optionally with a decay schedule) regressing a
fixed random target; "wide" (a sparse embedding of 300000 x 8, cut across the pservers, then
an fc to 1; a trainer also records the rows and bytes it sent and received each step);
"digits" (sklearn's digits, softmax regression through a hidden layer) for async
convergence. `--opt` sgd, adam or lazy_adam (Adam(lazy_mode=True)).

    PADDLE_TRAINING_ROLE=PSERVER PADDLE_CURRENT_ENDPOINT=127.0.0.1:6170 ... \\
        python ps_role.py --model mixed --opt adam --steps 4 --out ps0.npz
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

if os.environ.get("PS_ROLE_FLUID") == "paddle":
    import paddle.fluid as fluid
else:
    import spmd.fluid as fluid

BATCH = 16
SHAPES = {"embedding_0.w_0": (2048, 16), "fc_0.w_0": (116, 200), "fc_0.b_0": (200,),
          "fc_1.w_0": (200, 1), "fc_1.b_0": (1,)}  # the "mixed" model's parameters
WIDE_ROWS = 300_000  # the "wide" model's table: [WIDE_ROWS, 8]


def seeded_init(seed: int) -> dict:
    """Parameters of the mixed model drawn from numpy's generator with `seed`."""
    rng = np.random.default_rng(seed)
    return {n: (0.1 * rng.standard_normal(s)).astype("float32") for n, s in SHAPES.items()}


def build(model: str, opt: str, decay: bool, distributed: bool = False, wrap=None):
    """(main, startup, loss) of `model` minimized with `opt`; `wrap(optimizer)` (fleet's
    distributed_optimizer) wraps the optimizer before minimize when given."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        if model == "mixed":
            ids = fluid.data("ids", [None, 1], "int64")
            x = fluid.data("x", [None, 100], "float32")
            y = fluid.data("y", [None, 1], "float32")
            # --distributed: fluid's table kept on the pservers only (is_distributed=True)
            emb = fluid.layers.embedding(ids, size=[2048, 16], is_sparse=not distributed,
                                         is_distributed=distributed)
            h = fluid.layers.fc(fluid.layers.concat([x, emb], axis=1), 200, act="tanh")
            pred = fluid.layers.fc(h, 1)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        elif model == "wide":
            ids = fluid.data("ids", [None, 1], "int64")
            y = fluid.data("y", [None, 1], "float32")
            emb = fluid.layers.embedding(ids, size=[WIDE_ROWS, 8], is_sparse=True)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(emb, 1), y))
        else:
            x = fluid.data("x", [None, 64], "float32")
            y = fluid.data("y", [None, 1], "int64")
            h = fluid.layers.fc(x, 256, act="relu")
            logits = fluid.layers.fc(h, 10)
            loss = fluid.layers.mean(
                fluid.layers.softmax_with_cross_entropy(logits, y))
        lr = (0.05 if opt == "sgd" else 0.01) * (4 if model == "digits" else 1)
        if decay:
            lr = fluid.layers.exponential_decay(lr, 2, 0.5, staircase=False)
        optimizer = (fluid.optimizer.SGD(lr) if opt == "sgd" else
                     fluid.optimizer.Adam(lr, lazy_mode=opt == "lazy_adam"))
        if wrap is not None:
            optimizer = wrap(optimizer)
        optimizer.minimize(loss)
    return main, startup, loss


def batches(model: str, steps: int):
    """The global batch of every step (each trainer takes its half)."""
    if model == "mixed":
        rng = np.random.default_rng(0)
        for _ in range(steps):
            yield {"ids": rng.integers(0, 2048, (BATCH, 1)).astype("int64"),
                   "x": rng.standard_normal((BATCH, 100)).astype("float32"),
                   "y": rng.standard_normal((BATCH, 1)).astype("float32")}
        return
    if model == "wide":
        rng = np.random.default_rng(0)
        for _ in range(steps):
            yield {"ids": rng.integers(0, WIDE_ROWS, (BATCH, 1)).astype("int64"),
                   "y": rng.standard_normal((BATCH, 1)).astype("float32")}
        return
    from sklearn.datasets import load_digits

    data = load_digits()
    xs = (data.data / 16.0).astype("float32")
    ys = data.target.astype("int64").reshape(-1, 1)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        pick = rng.integers(0, len(xs), 64)
        yield {"x": xs[pick], "y": ys[pick]}


def shard(feed: dict, trainer_id: int, trainers: int) -> dict:
    n = len(next(iter(feed.values()))) // trainers
    return {k: v[trainer_id * n:(trainer_id + 1) * n] for k, v in feed.items()}


def _value(scope, name):
    var = scope.find_var(name)
    if var is None:
        return None
    try:  # fluid's Variable has no is_initialized; an empty tensor raises
        value = np.array(var.get_tensor())
    except Exception:  # noqa: BLE001
        return None
    return value if value.size else None


def persistables(program, scope) -> dict:
    out = {}
    for name, var in program.global_block().vars.items():
        if var.persistable and "@GRAD" not in name and "@LR_DECAY" not in name:
            value = _value(scope, name)
            if value is not None:
                out[name] = value
    return out


def block_rows(shape, index: int, pservers: int, min_block_size: int = 8192):
    """Rows [start, end) of block `index` of a parameter of `shape` (fluid's slice_variable)."""
    numel, width = int(np.prod(shape)), int(np.prod(shape[1:]))
    count = min(pservers, max(1, numel // min_block_size))
    size = math.ceil(numel / count)
    if size % width:
        size += width - size % width
    rows = size // width
    return index * rows, min((index + 1) * rows, shape[0])


def set_blocks(program, scope, init: dict, pservers: int) -> None:
    """The pserver's parameters (or their blocks, name.blockN) set from whole ones."""
    for name in program.global_block().vars:
        base, _, index = name.partition(".block")
        if base in init and (not index or index.isdigit()):
            value = init[base]
            if index:
                start, end = block_rows(value.shape, int(index), pservers)
                value = value[start:end]
            scope.var(name).get_tensor().set(value, fluid.CPUPlace())


def start_from(exe, startup, scope, init_path) -> None:
    """A LOCAL run's start: the startup program, then the parameters saved in `init_path`
    (the pserver jobs' initial values), so it trains from where the job trained."""
    exe.run(startup)
    for name, value in np.load(init_path).items():
        scope.var(name).get_tensor().set(value, fluid.CPUPlace())


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mixed")
    p.add_argument("--opt", default="sgd")
    p.add_argument("--decay", action="store_true")
    p.add_argument("--distributed", action="store_true")
    p.add_argument("--async", dest="async_", action="store_true")
    p.add_argument("--hash", action="store_true", help="split_method HashName")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--out", required=True)
    p.add_argument("--init")
    p.add_argument("--init-seed", type=int)
    p.add_argument("--checkpoint")
    p.add_argument("--restore")
    p.add_argument("--progress", help="a trainer appends the number of each step it ends")
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds after each step")
    args = p.parse_args(argv)

    role = os.environ["PADDLE_TRAINING_ROLE"]
    main_prog, startup, loss = build(args.model, args.opt, args.decay, args.distributed)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.global_scope()
    if role == "LOCAL":
        start_from(exe, startup, scope, args.init)
        losses = [float(exe.run(main_prog, feed=feed, fetch_list=[loss])[0])
                  for feed in batches(args.model, args.steps)]
        np.savez(args.out, losses=np.array(losses), **persistables(main_prog, scope))
        return 0

    endpoints = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"]
    trainers = int(os.environ["PADDLE_TRAINERS_NUM"])
    trainer_id = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
    config = fluid.DistributeTranspilerConfig()
    if args.hash:
        config.split_method = fluid.transpiler.HashName
    t = fluid.DistributeTranspiler(config)
    t.transpile(trainer_id, program=main_prog, pservers=endpoints, trainers=trainers,
                sync_mode=not args.async_, startup_program=startup)
    if role == "PSERVER":
        current = os.environ["PADDLE_CURRENT_ENDPOINT"]
        ps_prog = t.get_pserver_program(current)
        ps_startup = t.get_startup_program(current, ps_prog)
        exe.run(ps_startup)
        if args.init or args.init_seed is not None:
            init = dict(np.load(args.init)) if args.init else seeded_init(args.init_seed)
            set_blocks(ps_prog, scope, init, len(endpoints.split(",")))
        if args.restore:
            fluid.io.load_persistables(exe, args.restore, ps_prog)
        np.savez(args.out + ".init.npz", **persistables(ps_prog, scope))
        exe.run(ps_prog)
        np.savez(args.out, **persistables(ps_prog, scope))
        if args.checkpoint:
            fluid.io.save_persistables(exe, args.checkpoint, ps_prog)
        return 0
    trainer_prog = t.get_trainer_program()
    exe.run(startup)
    losses, moved = [], []
    for feed in batches(args.model, args.steps):
        before = _moved()
        losses.append(float(exe.run(trainer_prog, feed=shard(feed, trainer_id, trainers),
                                    fetch_list=[loss])[0]))
        moved.append({k: v - before[k] for k, v in _moved().items()})
        if args.progress:  # tests/unit/test_ps_faults.py kills a role between steps
            with open(args.progress, "a") as f:
                f.write(f"{len(losses)}\n")
        time.sleep(args.step_sleep)
    exe.close()
    traffic = {} if os.environ.get("PS_ROLE_FLUID") == "paddle" else {
        k: np.array([m[k] for m in moved]) for k in moved[0]}
    np.savez(args.out, losses=np.array(losses), **persistables(trainer_prog, scope),
             **traffic)
    return 0


def _moved() -> dict:
    """The rows and bytes this trainer's pserver clients moved so far (spmd only)."""
    if os.environ.get("PS_ROLE_FLUID") == "paddle":
        return {}
    from spmd.ps.rpc import client_bytes, client_rows

    rows, nbytes = client_rows(), client_bytes()
    return {"rows_sent": rows["sent"], "rows_received": rows["received"],
            "rows_prefetched": rows["prefetched"], "bytes_sent": nbytes["sent"],
            "bytes_received": nbytes["received"]}


if __name__ == "__main__":
    sys.exit(main())
