"""The SSA thread-pool executor (ExecutionStrategy.num_threads): step time with 1, 2 and 4
threads per place, on one place and on CPU_NUM=2 places (num_threads = threads per place *
places: as in fluid, num_threads is the pool of all the places of the process), for two
models:

- two_tower: two independent towers over the same input (784-512-512 ReLU, then 128), joined
  late (concat, fc 10), softmax cross-entropy, SGD, batch 128, float32: the forward and
  backward passes of the towers may run at once;
- mlp: bench/mlp.py's MLP 784-512-512-10, SGD, batch 128: one chain of layers, concurrency
  only between a layer's updates and the rest of the backward pass.

One BLAS thread per op (OMP_NUM_THREADS=1 and its kin, set before numpy loads), so the pool
is the only parallelism. Every configuration lives in one process and is timed in
interleaved rounds (so machine noise hits each alike); the medians over rounds of the wall
time and of the process CPU time per step are reported, with each ratio to 1 thread of the
same model and places. The threads' losses and parameters are checked bitwise equal to 1
thread's before timing.

    python bench/ssa.py [--rounds 7] [--steps 10] [--threads 1,2,4] [--out bench/out/ssa.md]
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS
os.environ["CPU_NUM"] = "2"  # the data-parallel programs without places= run on 2 places

import argparse  # noqa: E402
import pathlib  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import mlp  # noqa: E402

import spmd.fluid as fluid  # noqa: E402

BATCH, LR = 128, 0.01


def build_two_tower():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 784], "float32")
        y = fluid.data("y", [None, 1], "int64")
        towers = []
        for _ in range(2):
            h = fluid.layers.fc(x, 512, act="relu")
            h = fluid.layers.fc(h, 512, act="relu")
            towers.append(fluid.layers.fc(h, 128, act="relu"))
        logits = fluid.layers.fc(fluid.layers.concat(towers, axis=1), 10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.SGD(LR).minimize(loss)
    return main, startup, loss


MODELS = {"two_tower": build_two_tower, "mlp": mlp.build}


class Config:
    """One model on `places` places (2: CPU_NUM) with `threads` threads per place."""

    def __init__(self, model: str, places: int, threads: int):
        self.model, self.places, self.threads = model, places, threads
        main, startup, self.loss = MODELS[model]()
        self.scope, self.exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
        self.exe.run(startup, scope=self.scope)
        es = fluid.ExecutionStrategy()
        es.num_threads = threads * places
        self.program = fluid.CompiledProgram(main).with_data_parallel(
            loss_name=self.loss.name, exec_strategy=es,
            places=[fluid.CPUPlace()] if places == 1 else None)  # 2: CPU_NUM=2
        self.main, self.wall, self.cpu = main, [], []

    def step(self, feed):
        return self.exe.run(self.program, feed=feed, fetch_list=[self.loss], scope=self.scope)

    def state(self) -> bytes:
        return b"".join(np.array(self.scope.find_var(p.name).get_tensor()).tobytes()
                        for p in self.main.all_parameters())

    def report(self):
        plan = self.exe.plan_cache.find(self.program.data_parallel_program, ["x", "y"],
                                        [self.loss.name], 0)
        return plan.schedule_report()


def feeds(steps: int):
    rng = np.random.default_rng(0)
    return [{"x": rng.standard_normal((BATCH, 784)).astype("float32"),
             "y": rng.integers(0, 10, size=(BATCH, 1)).astype("int64")} for _ in range(steps)]


def check_equal(group: list[Config], data) -> None:
    """Every config of one model and places: the same losses and parameters, bitwise."""
    runs = [[np.asarray(c.step(f)[0]).tobytes() for f in data] + [c.state()] for c in group]
    for c, got in zip(group[1:], runs[1:]):
        if got != runs[0]:
            raise SystemExit(f"{c.model} on {c.places} place(s): {c.threads} threads differ "
                             f"from 1 thread")


def numpy_pair(threads: int, size: int = 384, repeat: int = 20) -> None:
    """Two independent chains of float32 matrix products, on one thread or on two: what two
    threads of numpy can gain on this machine right now (a loaded machine gives less)."""
    a = np.random.default_rng(0).standard_normal((size, size)).astype("float32") / size ** 0.5

    def chain():
        x = a
        for _ in range(repeat):
            x = x @ a
    if threads == 1:
        chain()
        chain()
        return
    other = threading.Thread(target=chain)
    other.start()
    chain()
    other.join()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--models", default="two_tower,mlp")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    if threads[0] != 1:
        threads.insert(0, 1)
    groups = [[Config(m, p, t) for t in threads] for m in args.models.split(",")
              for p in (1, 2)]
    data = feeds(args.steps)
    for group in groups:
        check_equal(group, data[:3])  # also the warm-up: plans compiled, threads started
    configs = [c for g in groups for c in g]
    machine: dict[int, list] = {1: [], 2: []}
    for _ in range(args.rounds):
        for threads_ in (1, 2):
            w0 = time.perf_counter()
            numpy_pair(threads_)
            machine[threads_].append(time.perf_counter() - w0)
        for c in configs:
            w0, c0 = time.perf_counter(), time.process_time()
            for f in data:
                c.step(f)
            c.wall.append((time.perf_counter() - w0) / len(data) * 1e3)
            c.cpu.append((time.process_time() - c0) / len(data) * 1e3)
    lines = ["# SSA thread-pool executor: step time by ExecutionStrategy.num_threads",
             "", f"{os.cpu_count()} CPUs, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
             f"batch {BATCH}, {args.rounds} interleaved rounds of {args.steps} steps, medians; "
             f"ratio = 1 thread's time / this time (> 1: faster). Losses and parameters "
             f"bitwise equal to 1 thread's (checked). Two independent chains of numpy "
             f"matrix products, on 2 threads vs 1, interleaved with them: "
             f"{statistics.median(machine[1]) / statistics.median(machine[2]):.2f}x (what "
             f"2 threads could gain on this machine during the run).", "",
             "| model | places | num_threads | threads per place | wall ms/step | ratio | "
             "process CPU ms/step | levels | widest | max in flight |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for group in groups:
        base = statistics.median(group[0].wall)
        for c in group:
            r = c.report()
            wall = statistics.median(c.wall)
            lines.append(f"| {c.model} | {c.places} | {c.threads * c.places} | {r.threads} | "
                         f"{wall:.2f} | "
                         f"{base / wall:.2f} | {statistics.median(c.cpu):.2f} | {r.levels} | "
                         f"{r.widest} | {r.max_in_flight} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(text)
    for c in configs:
        c.exe.close()


if __name__ == "__main__":
    main()
