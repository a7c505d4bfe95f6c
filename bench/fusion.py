"""The fusion passes on and off: BuildStrategy.fuse_elewise_add_act_ops on MLPs of fc + relu
layers, fuse_bn_act_ops on fc + batch_norm(relu) layers, fuse_all_optimizer_ops on many small
parameters (Adam, Momentum, SGD), and all three on one model. One training step of the same
program compiled both ways (CompiledProgram.with_data_parallel on one CPU place), one BLAS
thread, interleaved in rounds so machine noise hits both alike; the figure is the ratio of
median step times (off / on: above 1 the pass helps). Each pair is first checked to train
bitwise alike, so the comparison is of the same computation.

    OMP_NUM_THREADS=1 python bench/fusion.py [--rounds 15] [--steps 20] [--out bench/out/fusion.md]
    OMP_NUM_THREADS=1 python bench/fusion.py --chunks   # the run size of the fused updates

`--chunks` times the adam and momentum kernels over 1M elements cut into chunks of each size:
the fused updates go in runs of at most spmd.kernels.optim_fused.RUN_BYTES of parameters on
numpy, because past that size one long update is slower than several short ones.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import spmd.fluid as fluid  # noqa: E402

FIELDS = ("fuse_elewise_add_act_ops", "fuse_bn_act_ops", "fuse_all_optimizer_ops")


def _optimizer(name: str):
    return {"adam": lambda: fluid.optimizer.Adam(1e-3),
            "momentum": lambda: fluid.optimizer.Momentum(0.01, 0.9),
            "sgd": lambda: fluid.optimizer.SGD(0.01)}[name]()


def build(widths, batch_norm: bool, opt: str, classes: int = 10):
    """An MLP over `widths` (the input width first): fc + relu, or fc + batch_norm(relu)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, widths[0]], "float32")
        y = fluid.data("y", [None, 1], "int64")
        h = x
        for width in widths[1:]:
            if batch_norm:
                h = fluid.layers.batch_norm(fluid.layers.fc(h, width, bias_attr=False),
                                            act="relu")
            else:
                h = fluid.layers.fc(h, width, act="relu")
        logits = fluid.layers.fc(h, classes)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        _optimizer(opt).minimize(loss)
    return main, startup, loss


# name -> (what it measures, widths, batch, batch_norm, optimizer, the fields turned on)
CASES = {
    "add_act_mlp": ("fc+relu 784-512-512-512-10, batch 128, SGD", [784, 512, 512, 512], 128,
                    False, "sgd", ("fuse_elewise_add_act_ops",)),
    "add_act_wide_batch": ("fc+relu 256x6 layers, batch 1024, SGD", [256] * 7, 1024, False,
                           "sgd", ("fuse_elewise_add_act_ops",)),
    "add_act_small": ("fc+relu 64x16 layers, batch 32, SGD", [64] * 17, 32, False, "sgd",
                      ("fuse_elewise_add_act_ops",)),
    "bn_act": ("fc+bn+relu 256x4 layers, batch 1024, SGD", [256] * 5, 1024, True, "sgd",
               ("fuse_bn_act_ops",)),
    "bn_act_small": ("fc+bn+relu 64x8 layers, batch 64, SGD", [64] * 9, 64, True, "sgd",
                     ("fuse_bn_act_ops",)),
    "opt_adam_many": ("Adam, 61 layers of 32 (124 params), batch 16", [32] * 62, 16, False,
                      "adam", ("fuse_all_optimizer_ops",)),
    "opt_momentum_many": ("Momentum, same model", [32] * 62, 16, False, "momentum",
                          ("fuse_all_optimizer_ops",)),
    "opt_sgd_many": ("SGD, same model", [32] * 62, 16, False, "sgd",
                     ("fuse_all_optimizer_ops",)),
    "opt_adam_mlp": ("Adam, fc+relu 784-512-512-512-10 (8 params), batch 128",
                     [784, 512, 512, 512], 128, False, "adam", ("fuse_all_optimizer_ops",)),
    "all_three_bn_adam": ("all three, fc+bn+relu 64x16 layers, batch 64, Adam", [64] * 17, 64,
                          True, "adam", FIELDS),
}


def _runner(case, fields):
    _, widths, batch, bn, opt, _ = case
    main, startup, loss = build(widths, bn, opt)
    strategy = fluid.BuildStrategy()
    for f in fields:
        setattr(strategy, f, True)
    prog = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()])
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((batch, widths[0])).astype("float32"),
            "y": rng.integers(0, 10, size=(batch, 1))}

    def step(fetch=()):
        return exe.run(prog, feed=feed, fetch_list=list(fetch), scope=scope)

    return step, loss


def _timed(fn, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - t0) / steps


def bench(case, rounds: int, steps: int):
    off, loss = _runner(case, ())
    on, _ = _runner(case, case[5])
    for _ in range(3):  # same start, same data: the same losses bitwise, or nothing to compare
        a, b = off([loss.name])[0], on([loss.name])[0]
        assert np.array_equal(a, b), (a, b)
    off_t, on_t = [], []
    for _ in range(rounds):
        off_t.append(_timed(off, steps))
        on_t.append(_timed(on, steps))
    return statistics.median(off_t), statistics.median(on_t)


def _update_inputs(kind: str, arrays: dict, s: slice) -> dict:
    ins = {"Param": arrays["p"][s], "Grad": arrays["g"][s], "LearningRate": arrays["lr"]}
    if kind == "momentum":
        return dict(ins, Velocity=arrays["m"][s])
    return dict(ins, Moment1=arrays["m"][s], Moment2=arrays["v"][s],
                Beta1Pow=arrays["power"], Beta2Pow=arrays["power"])


def _chunked_update(kind: str, arrays: dict, n: int, chunk: int):
    """A function updating n elements with `kind`'s kernel, `chunk` elements per call."""
    from spmd.kernels.registry import run_kernel
    from spmd.ops import get_op_def

    attrs = get_op_def(kind).validate_attrs({"mu": 0.9} if kind == "momentum" else {}, kind)
    outs = frozenset(get_op_def(kind).output_slots)
    pieces = [_update_inputs(kind, arrays, slice(a, a + chunk)) for a in range(0, n, chunk)]

    def update():
        for ins in pieces:
            run_kernel(kind, np, ins, attrs, outs)

    return update


def bench_chunks(repeat: int = 5) -> str:
    """ns per element of adam and momentum over 2**20 elements, by chunk size."""
    n = 1 << 20
    rng = np.random.default_rng(0)
    lines = ["| dtype | chunk elements | chunk MiB | adam ns/elem | momentum ns/elem |",
             "|---|---:|---:|---:|---:|"]
    for dtype in ("float32", "float64"):
        arrays = {k: rng.standard_normal(n).astype(dtype) for k in ("p", "g", "m")}
        arrays.update(v=np.abs(arrays["m"]), lr=np.array([0.01], dtype),
                      power=np.array([0.9], dtype))
        for chunk in (1 << 14, 1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20):
            row = []
            for kind in ("adam", "momentum"):
                update = _chunked_update(kind, arrays, n, chunk)
                update()
                row.append(min(_timed(update, 3) for _ in range(repeat)) * 1e9 / n)
            mib = chunk * np.dtype(dtype).itemsize / (1 << 20)
            lines.append(f"| {dtype} | {chunk} | {mib:g} | {row[0]:.2f} | {row[1]:.2f} |")
            print(lines[-1], flush=True)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--out", default=None)
    parser.add_argument("--chunks", action="store_true",
                        help="time the update kernels by chunk size instead")
    args = parser.parse_args()
    if args.chunks:
        print(bench_chunks())
        return
    lines = ["# Fusion passes: one training step, pass off vs on (1 CPU place, 1 BLAS thread)",
             "", f"{args.rounds} interleaved rounds of {args.steps} steps; median ms/step.", "",
             "| case | model | off ms | on ms | off/on |", "|---|---|---:|---:|---:|"]
    for name in args.cases:
        case = CASES[name]
        off, on = bench(case, args.rounds, args.steps)
        lines.append(f"| {name} | {case[0]} | {off * 1e3:.2f} | {on * 1e3:.2f} | "
                     f"{off / on:.2f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print()
    print(text)


if __name__ == "__main__":
    main()
