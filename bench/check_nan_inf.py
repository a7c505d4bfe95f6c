"""What FLAGS_check_nan_inf costs: the MLP training step of bench/step.py with the check off
and on, in one process, interleaved in rounds so machine noise hits both alike; the ratio of
medians is the figure to quote. Off, the plan's step loop is the unchecked one.

    python bench/check_nan_inf.py [--rounds 15] [--steps 20] [--out bench/out/check_nan_inf.md]
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import statistics  # noqa: E402

import numpy as np  # noqa: E402
from mlp import BATCH, SIZES, build, timed, write_report  # noqa: E402

import spmd.fluid as fluid  # noqa: E402


def trainer(check: bool):
    """A step function of its own program and scope, compiled with the check `check`."""
    os.environ["FLAGS_check_nan_inf"] = "1" if check else "0"  # read when the plan is built
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((BATCH, SIZES[0])).astype("float32"),
            "y": rng.integers(0, SIZES[-1], size=(BATCH, 1)).astype("int64")}
    main, startup, loss = build()
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)

    def step():
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)

    step()  # compiles the plan now, under this setting of the flag
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default=None, help="also write the Markdown report here")
    args = parser.parse_args()
    off, on = trainer(False), trainer(True)
    for _ in range(3):
        off(), on()
    off_t, on_t = [], []
    for _ in range(args.rounds):
        off_t.append(timed(off, args.steps))
        on_t.append(timed(on, args.steps))
    off_s, on_s = statistics.median(off_t), statistics.median(on_t)
    write_report("\n".join([
        "# bench/check_nan_inf.py",
        "",
        f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32, SGD, 1 BLAS thread; "
        f"median of {args.rounds} rounds x {args.steps} steps, interleaved.",
        "",
        "| FLAGS_check_nan_inf | ms/step |",
        "|---|---|",
        f"| 0 (default) | {off_s * 1e3:.3f} |",
        f"| 1 | {on_s * 1e3:.3f} |",
        f"| **ratio on / off** | **{on_s / off_s:.3f}** |",
    ]), args.out)


if __name__ == "__main__":
    main()
