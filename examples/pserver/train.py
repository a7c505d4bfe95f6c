"""A CTR-style parameter-server job, written as fluid 1.x users wrote them (the
DistributeTranspiler example of fluid's docs): only the import line differs from fluid 1.8.

Each sample has SLOTS sparse feature ids (a user, an item, a category, ...) looked up in one
embedding table of VOCAB rows (is_sparse=True: the trainers send SelectedRows gradients, only
the rows they touched) and DENSE dense features; a small MLP predicts a click. The clicks are
drawn from a fixed hidden logistic model, so the loss falls as the job learns it.

The role comes from fluid's environment variables, which `paddle-launch --server_num N
--worker_num M` (or `mpiexec -n N+M paddle-launch --server_num N`) sets:
PADDLE_TRAINING_ROLE (PSERVER / TRAINER), PADDLE_PSERVERS_IP_PORT_LIST (or PADDLE_PSERVER_IPS
with PADDLE_PORT), PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ID, PADDLE_CURRENT_ENDPOINT (or POD_IP
with PADDLE_PORT). Without PADDLE_TRAINING_ROLE it trains in one process.

    paddle-launch --server_num 2 --worker_num 2 examples/pserver/train.py [--async] [--steps 200]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import spmd.fluid as fluid  # fluid 1.x: import paddle.fluid as fluid

SLOTS, VOCAB, EMB, DENSE = 4, 10000, 8, 13


def ctr_net():
    ids = fluid.data("ids", [None, SLOTS, 1], "int64")
    dense = fluid.data("dense", [None, DENSE], "float32")
    label = fluid.data("label", [None, 1], "float32")
    emb = fluid.layers.embedding(ids, size=[VOCAB, EMB], is_sparse=True,
                                 param_attr=fluid.ParamAttr(name="ctr_embedding"))
    emb = fluid.layers.reshape(emb, [-1, SLOTS * EMB])
    h = fluid.layers.fc(fluid.layers.concat([emb, dense], axis=1), 64, act="relu")
    h = fluid.layers.fc(h, 32, act="relu")
    logit = fluid.layers.fc(h, 1)
    loss = fluid.layers.mean(
        fluid.layers.sigmoid_cross_entropy_with_logits(logit, label))
    return loss


def reader(batch_size: int, trainer_id: int, trainers: int, seed: int = 0):
    """Endless batches of this trainer's share of a synthetic click log."""
    truth = np.random.default_rng(1234)
    id_weight = truth.standard_normal(VOCAB).astype("float32")  # the hidden model
    dense_weight = truth.standard_normal(DENSE).astype("float32")
    rng = np.random.default_rng(seed + 1000 * trainer_id)
    while True:
        ids = rng.integers(0, VOCAB // 10, (batch_size, SLOTS)).astype("int64")
        ids += (np.arange(SLOTS) * (VOCAB // SLOTS)).astype("int64")  # a range per slot
        dense = rng.standard_normal((batch_size, DENSE)).astype("float32")
        z = id_weight[ids].sum(axis=1) + 0.5 * dense @ dense_weight
        label = (rng.random(batch_size) < 1 / (1 + np.exp(-z))).astype("float32")
        yield {"ids": ids.reshape(-1, SLOTS, 1), "dense": dense, "label": label.reshape(-1, 1)}


def train_loop(exe, program, loss, args, trainer_id, trainers):
    losses = []
    batches = reader(args.batch_size, trainer_id, trainers)
    for step in range(args.steps):
        (value,) = exe.run(program, feed=next(batches), fetch_list=[loss])
        losses.append(float(np.asarray(value).reshape(-1)[0]))
        if step % args.log_every == 0 or step == args.steps - 1:
            print(f"trainer {trainer_id} step {step:4d} loss {losses[-1]:.4f}", flush=True)
    k = max(1, min(10, len(losses) // 4))
    first, last = float(np.mean(losses[:k])), float(np.mean(losses[-k:]))
    print(f"trainer {trainer_id}: mean loss of the first {k} steps {first:.4f}, "
          f"of the last {k} {last:.4f}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--async", dest="async_mode", action="store_true",
                   help="async mode (sync_mode=False): no barrier, each gradient applied as "
                        "it arrives")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--log_every", type=int, default=20)
    args = p.parse_args(argv)

    loss = ctr_net()
    fluid.optimizer.Adagrad(learning_rate=args.lr).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())

    role = os.getenv("PADDLE_TRAINING_ROLE")
    if role is None:  # one process
        exe.run(fluid.default_startup_program())
        train_loop(exe, fluid.default_main_program(), loss, args, 0, 1)
        return 0

    port = os.getenv("PADDLE_PORT", "6174")
    pserver_endpoints = os.getenv("PADDLE_PSERVERS_IP_PORT_LIST") or ",".join(
        f"{ip}:{port}" for ip in os.getenv("PADDLE_PSERVER_IPS", "127.0.0.1").split(","))
    trainers = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))
    trainer_id = int(os.getenv("PADDLE_TRAINER_ID", "0"))
    current_endpoint = os.getenv("PADDLE_CURRENT_ENDPOINT") or \
        f"{os.getenv('POD_IP', '127.0.0.1')}:{port}"

    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id, pservers=pserver_endpoints, trainers=trainers,
                sync_mode=not args.async_mode)
    if role == "PSERVER":
        pserver_program = t.get_pserver_program(current_endpoint)
        pserver_startup = t.get_startup_program(current_endpoint, pserver_program)
        exe.run(pserver_startup)
        print(f"pserver {current_endpoint}: serving "
              f"({'async' if args.async_mode else 'sync'} mode, {trainers} trainers)", flush=True)
        exe.run(pserver_program)  # returns once every trainer called exe.close()
        print(f"pserver {current_endpoint}: done", flush=True)
    elif role == "TRAINER":
        trainer_program = t.get_trainer_program()
        exe.run(fluid.default_startup_program())
        train_loop(exe, trainer_program, loss, args, trainer_id, trainers)
        exe.close()  # tells the pservers this trainer is done
    else:
        raise SystemExit(f"PADDLE_TRAINING_ROLE={role!r}: expected PSERVER or TRAINER")
    return 0


if __name__ == "__main__":
    sys.exit(main())
