"""Initialisation speed of a large table (issue 24, item 4): seconds of `exe.run(startup)` for
`embedding(size=[rows, dim], is_sparse=True)` + Adam(lazy_mode=True), broken down per startup op
(fluid.profiler's events), each beside numpy's own fill of the same bytes in a fresh array:
uniform_random -> Generator.random(out=float32 array), gaussian_random -> standard_normal(out=),
fill_constant -> np.full. Ratios are spmd's op / numpy's (best of --repeat for both, fresh
arrays, so page faults count on both sides). numpy's float32 fill draws other values (half the
generator's bits for uniform, a float32 ziggurat for normal), so it is the floor; spmd's values
are numpy's float64 uniform(low, high) / normal(mean, std) cast, bit for bit, so the second
ratio is against numpy making those same values its own way (a whole float64 draw, then cast).

    python bench/init_speed.py [--rows 1000000] [--dim 64] [--repeat 3]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import time

import numpy as np

import spmd.fluid as fluid
import spmd.profiler as profiler


def _startup(rows, dim, init):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, 1], "int64")
        y = fluid.data("y", [None, 1], "int64")
        emb = fluid.layers.embedding(ids, size=[rows, dim], is_sparse=True,
                                     param_attr=fluid.ParamAttr(name="table", initializer=init))
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(emb, 3), y))
        fluid.optimizer.Adam(0.05, lazy_mode=True).minimize(loss)
    return start


def _spmd_ops(start, repeat):
    """(whole run seconds, {op type: seconds of its largest call}), best of `repeat`."""
    best_run, best_ops = float("inf"), {}
    for _ in range(repeat):
        scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
        profiler.start_profiler("CPU")
        t = time.perf_counter()
        exe.run(start, scope=scope)
        whole = time.perf_counter() - t
        events = list(profiler.active().events)
        profiler.reset_profiler()
        with contextlib.redirect_stdout(io.StringIO()):  # its summary table: not wanted here
            profiler.stop_profiler(None, "/dev/null")
        del scope
        best_run = min(best_run, whole)
        ops = {}
        for name, _thread, a, b in events:
            ops[name] = max(ops.get(name, 0.0), (b - a) / 1e9)
        for name, s in ops.items():
            best_ops[name] = min(best_ops.get(name, float("inf")), s)
    return best_run, best_ops


def _numpy_fill(kind, shape, repeat, same_values=False):
    """Best-of-`repeat` seconds of numpy filling a fresh float32 array of `shape` the way the
    op `kind` fills it: its own float32 fill (the floor), or with `same_values` numpy's own
    computation of the op's values (the float64 draw of Generator.uniform / normal, cast)."""
    best = float("inf")
    for _ in range(repeat):
        rng = np.random.default_rng(0)
        t = time.perf_counter()
        if kind == "fill_constant":
            a = np.full(shape, 0.0, dtype=np.float32)
        elif same_values:
            draw = rng.uniform if kind == "uniform_random" else rng.normal
            a = draw(-0.1, 0.1, size=shape).astype(np.float32)
        else:
            a = np.empty(shape, dtype=np.float32)
            draw = rng.random if kind == "uniform_random" else rng.standard_normal
            draw(out=a, dtype=np.float32)
        best = min(best, time.perf_counter() - t)
        del a
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    shape = (args.rows, args.dim)
    inits = {"uniform": fluid.initializer.Uniform(-0.1, 0.1),
             "normal": fluid.initializer.Normal(0.0, 0.1),
             "xavier": fluid.initializer.Xavier()}
    floors = {}
    print(f"table {args.rows} x {args.dim} float32 ({args.rows * args.dim * 4 / 2**20:.0f} MiB), "
          f"best of {args.repeat}")
    for label, init in inits.items():
        whole, ops = _spmd_ops(_startup(args.rows, args.dim, init), args.repeat)
        print(f"{label:8s} exe.run(startup) {whole:7.3f} s")
        for name, s in sorted(ops.items(), key=lambda kv: -kv[1]):
            if s < 1e-3 or name in profiler.RUN_EVENTS:
                continue
            if name not in floors and name in ("uniform_random", "gaussian_random",
                                               "fill_constant"):
                floors[name] = (_numpy_fill(name, shape, args.repeat),
                                None if name == "fill_constant"
                                else _numpy_fill(name, shape, args.repeat, same_values=True))
            line = f"    {name:16s} {s:7.3f} s"
            if name in floors:
                fill, same = floors[name]
                line += f"  {s / fill:5.2f}x numpy's fill ({fill:.3f} s)"
                if same is not None:
                    line += f"  {s / same:5.2f}x numpy's same values ({same:.3f} s)"
            print(line)

if __name__ == "__main__":
    main()
