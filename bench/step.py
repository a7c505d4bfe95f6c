"""Per-step cost of spmd's Executor against the same training step hand-written in numpy.

MLP 784-512-512-10, ReLU, softmax cross-entropy, SGD, float32, batch 128, one BLAS thread.
Both run in the same process, interleaved in rounds, so machine noise hits both alike; the
ratio of medians is the figure to quote. Also: per-op dispatch overhead over a chain of 100
tiny ops, against the same 100 numpy calls, and the Python calls a step and per op (cProfile's
count: the same on any machine, so a dispatch regression is visible as a number).

    python bench/step.py [--rounds 15] [--steps 20] [--out bench/out/step.md]
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import statistics  # noqa: E402

import numpy as np  # noqa: E402
from mlp import BATCH, SIZES, build, numpy_grads, params_of, sgd, timed, write_report  # noqa: E402

import spmd.fluid as fluid  # noqa: E402


def numpy_step(params, x, y):
    """The same step by hand: forward, softmax cross-entropy, backward, SGD."""
    loss, grads = numpy_grads(params, x, y, len(y))
    sgd(params, grads)
    return loss


def bench_step(rounds, steps):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZES[0])).astype("float32")
    y = rng.integers(0, SIZES[-1], size=(BATCH, 1)).astype("int64")
    main, startup, loss = build()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    params = params_of(scope)
    feed = {"x": x, "y": y}

    # same start, same data: the two must agree, or the comparison means nothing
    got = float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0][0])
    want = float(numpy_step(params, x, y))
    assert abs(got - want) < 1e-4 * max(1.0, abs(want)), (got, want)

    def spmd_run():
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)

    def numpy_run():
        numpy_step(params, x, y)

    for _ in range(3):
        spmd_run(), numpy_run()
    spmd_t, numpy_t = [], []
    for _ in range(rounds):
        spmd_t.append(timed(spmd_run, steps))
        numpy_t.append(timed(numpy_run, steps))
    return statistics.median(spmd_t), statistics.median(numpy_t)


def python_calls(run, steps: int = 10) -> float:
    """Python function calls (cProfile's count: Python functions and builtins alike) per call
    of `run`, after one warm call: deterministic, so a dispatch regression shows as a number
    whatever the machine's load."""
    import cProfile
    import pstats

    run()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        run()
    prof.disable()
    return pstats.Stats(prof).total_calls / steps


def mlp_calls():
    """(Python calls per step of the MLP, its op count)."""
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((BATCH, SIZES[0])).astype("float32"),
            "y": rng.integers(0, SIZES[-1], size=(BATCH, 1)).astype("int64")}
    main, startup, loss = build()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    calls = python_calls(lambda: exe.run(main, feed=feed, fetch_list=[loss], scope=scope))
    return calls, len(main.global_block().ops)


def chain(n_ops=100):
    """(program, feed, last variable) of `n_ops` scale ops on a [1] array."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        v = fluid.data("v", [1], "float32")
        for _ in range(n_ops):
            v = fluid.layers.scale(v, scale=1.0001)
    return main, {"v": np.ones(1, "float32")}, v


def chain_calls(n_ops=100) -> float:
    main, feed, v = chain(n_ops)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    return python_calls(lambda: exe.run(main, feed=feed, fetch_list=[v], scope=scope))


def bench_dispatch(rounds, n_ops=100):
    main, feed, v = chain(n_ops)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    a = feed["v"]

    def spmd_run():
        exe.run(main, feed=feed, fetch_list=[v], scope=scope)

    def numpy_run():
        out = a
        for _ in range(n_ops):
            out = out * np.float32(1.0001)
        return out

    spmd_run()
    s = statistics.median(timed(spmd_run, 200) for _ in range(rounds))
    n = statistics.median(timed(numpy_run, 200) for _ in range(rounds))
    return s / n_ops * 1e6, n / n_ops * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default=None, help="also write the Markdown report here")
    args = parser.parse_args()
    spmd_s, numpy_s = bench_step(args.rounds, args.steps)
    per_op, numpy_op = bench_dispatch(args.rounds)
    step_calls, n_ops = mlp_calls()
    per_chain_op = chain_calls() / 100
    report = "\n".join([
        "# bench/step.py",
        "",
        f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32, SGD, 1 BLAS thread; "
        f"median of {args.rounds} rounds x {args.steps} steps, interleaved.",
        "",
        "| what | ms/step |",
        "|---|---|",
        f"| spmd Executor | {spmd_s * 1e3:.3f} |",
        f"| hand-written numpy | {numpy_s * 1e3:.3f} |",
        f"| **ratio spmd / numpy** | **{spmd_s / numpy_s:.3f}** (target <= 1.10) |",
        "",
        "| chain of 100 tiny ops (scale on [1]) | us/op |",
        "|---|---|",
        f"| spmd Executor | {per_op:.2f} |",
        f"| numpy call alone | {numpy_op:.2f} |",
        f"| **dispatch overhead** | **{per_op - numpy_op:.2f}** |",
        "",
        "Python calls (cProfile's count, functions and builtins; deterministic, whatever "
        "the load):",
        "",
        "| what | calls |",
        "|---|---|",
        f"| MLP step ({n_ops} ops) | {step_calls:.0f} ({step_calls / n_ops:.1f} per op) |",
        f"| chain of 100 scale ops, per op | {per_chain_op:.1f} |",
    ])
    write_report(report, args.out)


if __name__ == "__main__":
    main()
