"""One role of a parameter-server job for the pserver behaviours of issue 22, in the idiom of
Paddle 1.8's dist_word2vec.py / the model zoo's CTR trainers: the role from
PADDLE_TRAINING_ROLE (PSERVER / TRAINER / LOCAL), the job from fluid's PADDLE_* variables.
Each trainer feeds its half of every global batch of 2 samples (test_dist_base's
use_reader_alloc); LOCAL feeds the whole batch in one process. `--out` gets an .npz of the
losses and the parameters the role ends with (a pserver: its blocks).

Models: "w2v" (dist_word2vec's net: one table shared by four is_sparse lookups),
"lr_attr" (an fc with ParamAttr(learning_rate=0.5)), "seqpool" / "seqpool_distributed"
(sequence_pool over an is_sparse / is_distributed embedding of LoD ids).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import spmd.fluid as fluid

DICT = 2074  # imikolov's dictionary at min_word_freq=50, as dist_word2vec builds it
WORDS = ["firstw", "secondw", "thirdw", "forthw", "nextw"]


def _const(value):
    return fluid.initializer.Constant(value)


def build(model: str):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        if model == "w2v":
            words = [fluid.layers.data(name=n, shape=[1], dtype="int64") for n in WORDS]
            embs = [fluid.layers.embedding(
                input=w, size=[DICT, 32], is_sparse=True,
                param_attr=fluid.ParamAttr(name="shared_w", initializer=_const(0.1)))
                for w in words[:4]]
            hidden = fluid.layers.fc(fluid.layers.concat(embs, axis=1), 256, act="sigmoid",
                                     param_attr=fluid.ParamAttr(initializer=_const(0.1)))
            predict = fluid.layers.fc(hidden, DICT, act="softmax",
                                      param_attr=fluid.ParamAttr(initializer=_const(0.1)))
            loss = fluid.layers.mean(fluid.layers.cross_entropy(predict, words[4]))
            lr = 0.001
        elif model == "lr_attr":
            x = fluid.layers.data(name="x", shape=[8], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            h = fluid.layers.fc(x, 16, act="tanh", param_attr=fluid.ParamAttr(
                learning_rate=0.5, initializer=_const(0.1)))
            pred = fluid.layers.fc(h, 1, param_attr=fluid.ParamAttr(initializer=_const(0.1)))
            loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
            lr = 0.1
        else:
            ids = fluid.layers.data(name="ids", shape=[1], dtype="int64", lod_level=1)
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            emb = fluid.layers.embedding(
                ids, size=[1000, 8], is_sparse=True,
                is_distributed=model == "seqpool_distributed",
                param_attr=fluid.ParamAttr(name="table", initializer=_const(0.1)))
            pooled = fluid.layers.sequence_pool(emb, "sum")
            pred = fluid.layers.fc(pooled, 1, param_attr=fluid.ParamAttr(initializer=_const(0.1)))
            loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
            lr = 0.1
        fluid.optimizer.SGD(lr).minimize(loss)
    return main, startup, loss


def batches(model: str, steps: int):
    """Global batches of 2 samples (a LoD batch as a LoDTensor of 2 sequences)."""
    rng = np.random.RandomState(3)
    for _ in range(steps):
        if model == "w2v":
            grams = np.minimum(rng.zipf(1.3, (2, 5)), DICT) - 1
            yield {n: grams[:, j:j + 1].astype("int64") for j, n in enumerate(WORDS)}
        elif model == "lr_attr":
            yield {"x": rng.rand(2, 8).astype("float32"), "y": rng.rand(2, 1).astype("float32")}
        else:
            lens = [int(rng.randint(1, 4)), int(rng.randint(1, 4))]
            ids = rng.randint(0, 1000, (sum(lens), 1)).astype("int64")
            yield {"ids": fluid.create_lod_tensor(ids, [lens], fluid.CPUPlace()),
                   "y": rng.rand(2, 1).astype("float32")}


def half(feed: dict, trainer_id: int) -> dict:
    """Trainer `trainer_id`'s sample of a global batch of 2."""
    out = {}
    for name, value in feed.items():
        if isinstance(value, fluid.LoDTensor):
            lens = value.recursive_sequence_lengths()[0]
            start = sum(lens[:trainer_id])
            rows = np.array(value)[start:start + lens[trainer_id]]
            out[name] = fluid.create_lod_tensor(rows, [[lens[trainer_id]]], fluid.CPUPlace())
        else:
            out[name] = value[trainer_id:trainer_id + 1]
    return out


def values(program, scope) -> dict:
    out = {}
    for name, var in program.global_block().vars.items():
        if var.persistable and "@GRAD" not in name and scope.find_var(name) is not None:
            try:
                value = np.array(scope.find_var(name).get_tensor())
            except Exception:  # noqa: BLE001 - declared, never filled (fake_init, raw vars)
                continue
            if value.size:
                out[name] = value
    return out


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="w2v")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    role = os.environ["PADDLE_TRAINING_ROLE"]
    main_prog, startup, loss = build(args.model)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.global_scope()
    if role == "LOCAL":
        exe.run(startup)
        losses = [float(exe.run(main_prog, feed=f, fetch_list=[loss])[0][0])
                  for f in batches(args.model, args.steps)]
        np.savez(args.out, losses=np.array(losses), **values(main_prog, scope))
        return 0
    trainer_id = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id, program=main_prog, startup_program=startup, sync_mode=True,
                pservers=os.environ["PADDLE_PSERVERS_IP_PORT_LIST"],
                trainers=int(os.environ["PADDLE_TRAINERS_NUM"]))
    if role == "PSERVER":
        current = os.environ["PADDLE_CURRENT_ENDPOINT"]
        ps_prog = t.get_pserver_program(current)
        exe.run(t.get_startup_program(current, ps_prog))
        exe.run(ps_prog)
        np.savez(args.out, **values(ps_prog, scope))
        return 0
    trainer_prog = t.get_trainer_program()
    exe.run(startup)
    losses = [float(exe.run(trainer_prog, feed=half(f, trainer_id), fetch_list=[loss])[0][0])
              for f in batches(args.model, args.steps)]
    exe.close()
    np.savez(args.out, losses=np.array(losses), **values(trainer_prog, scope))
    return 0


if __name__ == "__main__":
    sys.exit(main())
