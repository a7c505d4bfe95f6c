"""Sequence and sparse-embedding steps against PyTorch eager, and sparse data parallel vs dense.

- LSTM language model: embedding 2000x128, fluid.layers.lstm (cuDNN-style op, run on CPU),
  hidden 128, 20 steps x batch 16, fc to the vocabulary, softmax cross entropy, SGD; against
  the same model in PyTorch (nn.Embedding, nn.LSTM, nn.Linear, CrossEntropyLoss, SGD);
- sparse CTR: 3 slots of 4 ids each in a 100000x16 table, fc 48-64-2, SGD; spmd with
  is_sparse=True and False, against PyTorch's nn.Embedding(sparse=True) + SGD;
- data parallel on 2 ranks (mpiexec, launched by this script): the sparse CTR step with
  is_sparse=True (c_allgather_rows of the looked-up rows) and False (the dense table's
  gradient all-reduced).

Timings are interleaved in rounds within one run and the ratios are the figures to quote
(this machine is shared). One BLAS/torch thread. PyTorch is optional: without it those rows
say so.

    python bench/sequence.py [--rounds 7] [--steps 10] [--out bench/out/sequence.md]
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
from mlp import timed, write_report  # noqa: E402

VOCAB, EMB, HIDDEN, SEQ, BATCH = 2000, 128, 128, 20, 16
CTR_VOCAB, CTR_DIM, SLOTS, IDS_PER_SLOT, CTR_BATCH = 100_000, 16, 3, 4, 256


def lm_spmd():
    """(run one step, ) for the LSTM language model in spmd."""
    import spmd.fluid as fluid

    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 1
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        words = fluid.data("words", [SEQ, BATCH], "int64")
        target = fluid.data("target", [SEQ * BATCH, 1], "int64")
        emb = fluid.embedding(words, size=[VOCAB, EMB])
        init = fluid.layers.zeros([1, BATCH, HIDDEN], "float32")
        out, _, _ = fluid.layers.lstm(emb, init, init, SEQ, HIDDEN, num_layers=1)
        logits = fluid.layers.fc(fluid.layers.reshape(out, [-1, HIDDEN]), VOCAB)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, target))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(start, scope=scope)
    rng = np.random.default_rng(0)
    feed = {"words": rng.integers(0, VOCAB, (SEQ, BATCH)),
            "target": rng.integers(0, VOCAB, (SEQ * BATCH, 1))}
    return lambda: exe.run(main, feed=feed, fetch_list=[loss], scope=scope)


def lm_torch():
    import torch

    torch.set_num_threads(1)
    emb, lstm = torch.nn.Embedding(VOCAB, EMB), torch.nn.LSTM(EMB, HIDDEN)
    fc = torch.nn.Linear(HIDDEN, VOCAB)
    params = list(emb.parameters()) + list(lstm.parameters()) + list(fc.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    rng = np.random.default_rng(0)
    words = torch.from_numpy(rng.integers(0, VOCAB, (SEQ, BATCH)))
    target = torch.from_numpy(rng.integers(0, VOCAB, SEQ * BATCH))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        out, _ = lstm(emb(words))
        loss_fn(fc(out.reshape(-1, HIDDEN)), target).backward()
        opt.step()
    return step


def ctr_program(is_sparse: bool):
    import spmd.fluid as fluid

    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 2
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, SLOTS * IDS_PER_SLOT], "int64")
        y = fluid.data("y", [None, 1], "int64")
        emb = fluid.embedding(ids, size=[CTR_VOCAB, CTR_DIM], is_sparse=is_sparse)
        pooled = fluid.layers.reduce_sum(
            fluid.layers.reshape(emb, [-1, SLOTS, IDS_PER_SLOT, CTR_DIM]), dim=2)
        h = fluid.layers.fc(fluid.layers.reshape(pooled, [-1, SLOTS * CTR_DIM]), 64,
                            act="relu")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(h, 2), y))
        fluid.optimizer.SGD(0.05).minimize(loss)
    return main, start, loss


def ctr_feed(seed=0, batch=CTR_BATCH):
    rng = np.random.default_rng(seed)
    return {"ids": rng.integers(0, CTR_VOCAB, (batch, SLOTS * IDS_PER_SLOT)),
            "y": rng.integers(0, 2, (batch, 1))}


def ctr_spmd(is_sparse: bool, compiled=False, seed=0, batch=CTR_BATCH):
    import spmd.fluid as fluid

    main, start, loss = ctr_program(is_sparse)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(start, scope=scope)
    prog = (fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
            if compiled else main)
    feed = ctr_feed(seed, batch)
    return lambda: exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)


def ctr_torch():
    import torch

    torch.set_num_threads(1)
    emb = torch.nn.Embedding(CTR_VOCAB, CTR_DIM, sparse=True)
    fc1, fc2 = torch.nn.Linear(SLOTS * CTR_DIM, 64), torch.nn.Linear(64, 2)
    opt = torch.optim.SGD(list(emb.parameters()) + list(fc1.parameters())
                          + list(fc2.parameters()), lr=0.05)
    feed = ctr_feed()
    ids = torch.from_numpy(feed["ids"])
    y = torch.from_numpy(feed["y"].reshape(-1))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        pooled = emb(ids).reshape(-1, SLOTS, IDS_PER_SLOT, CTR_DIM).sum(2)
        h = torch.relu(fc1(pooled.reshape(-1, SLOTS * CTR_DIM)))
        loss_fn(fc2(h), y).backward()
        opt.step()
    return step


def interleaved(fns: dict, rounds: int, steps: int, barrier=None) -> dict:
    """Median ms per step of each fn, timed in turn within every round."""
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            if barrier:
                barrier()
            times[name].append(timed(fn, steps))
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def one_process(rounds: int, steps: int) -> dict:
    fns = {"lm_spmd": lm_spmd(), "ctr_sparse": ctr_spmd(True), "ctr_dense": ctr_spmd(False)}
    try:
        fns.update(lm_torch=lm_torch(), ctr_torch=ctr_torch())
    except ImportError:
        pass
    for fn in fns.values():  # compile, warm up
        fn(), fn()
    return interleaved(fns, rounds, steps)


def measure_rank(rounds: int, steps: int) -> dict:
    """Under mpiexec -n 2: the sparse CTR step with is_sparse True and False, data parallel."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    fns = {"dp_sparse": ctr_spmd(True, compiled=True, seed=comm.rank, batch=CTR_BATCH // 2),
           "dp_dense": ctr_spmd(False, compiled=True, seed=comm.rank, batch=CTR_BATCH // 2)}
    for fn in fns.values():
        fn(), fn()
    return interleaved(fns, rounds, steps, comm.Barrier)


def report(single: dict, dist: dict) -> str:
    def ratio(a, b):
        return f"{single[a] / single[b]:.2f}" if a in single and b in single else "n/a (no torch)"

    lines = [
        "# Sequence and sparse-embedding steps",
        "",
        "One process (ms per step are medians of interleaved rounds; quote the ratios):",
        "",
        "| step | spmd / reference |",
        "|---|---|",
        f"| LSTM language model, spmd / PyTorch eager | {ratio('lm_spmd', 'lm_torch')} |",
        f"| sparse CTR (is_sparse=True), spmd / PyTorch eager (sparse=True) | "
        f"{ratio('ctr_sparse', 'ctr_torch')} |",
        f"| sparse CTR, spmd is_sparse=True / is_sparse=False | "
        f"{ratio('ctr_sparse', 'ctr_dense')} |",
        "",
        "Data parallel, 2 ranks (mpiexec), half the batch each:",
        "",
        "| step | ratio |",
        "|---|---|",
        f"| sparse CTR, is_sparse=True (rows gathered) / False (table all-reduced) | "
        f"{dist['dp_sparse'] / dist['dp_dense']:.2f} |",
        "",
        "Raw medians (ms): " + ", ".join(f"{k} {v:.2f}" for k, v in {**single, **dist}.items()),
    ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", default=None)
    parser.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_worker:
        from mpi4py import MPI

        result = measure_rank(args.rounds, args.steps)
        if MPI.COMM_WORLD.rank == 0:
            print("RESULT " + json.dumps(result))
        return
    single = one_process(args.rounds, args.steps)
    here = pathlib.Path(__file__).resolve()
    mpiexec = pathlib.Path(sys.executable).with_name("mpiexec")
    out = subprocess.run([str(mpiexec), "-n", "2", sys.executable, str(here), "--rank-worker",
                          "--rounds", str(args.rounds), "--steps", str(args.steps)],
                         capture_output=True, text=True, check=True)
    dist = json.loads(next(line[7:] for line in out.stdout.splitlines()
                           if line.startswith("RESULT ")))
    write_report(report(single, dist), args.out)


if __name__ == "__main__":
    main()
