"""Peak resident memory and allocations per training step: spmd against PyTorch eager.

Three models, float32, one BLAS thread, each framework in a fresh process per case:

- adam64m: four fc layers 4096 -> 4096 (67M parameters, 256 MiB), ReLU between, mean squared
  error against a target, Adam, batch 32;
- cnn: the small CNN (conv 5x5 32 + relu + max pool 2, conv 5x5 64 + relu + max pool 2, fc 10),
  batch 64 of 1x28x28, softmax cross-entropy, SGD;
- mlp: bench/step.py's MLP 784-512-512-10, batch 128, softmax cross-entropy, SGD.

Per run: the peak resident set (VmHWM of /proc/self/status, the whole process: interpreter,
libraries, model, every step), the resident set after the imports (the `base` column) and the
peak above it; then, over `--steps` more steps, the bytes and the number of blocks of 64 KiB
or more that the process allocates per step (malloc, calloc, realloc, posix_memalign: counted
by a small LD_PRELOAD library built with the C compiler when there is one, for spmd and
PyTorch alike), and for spmd the step's transient peak of numpy data above what it holds
between steps (tracemalloc, which numpy reports its data allocations to). spmd runs with the
BuildStrategy memory knobs on (`spmd`: enable_inplace and memory_optimize) and off
(`spmd-off`), through CompiledProgram(main, build_strategy), and as a plain Executor.run of
the program (`spmd-plain`: the defaults, updates in place, program order). PyTorch is optional:
without it (PYTHONPATH pointing at an environment that has it) its column is skipped.

    python bench/memory.py [--cases adam64m,cnn,mlp] [--steps 3] [--out bench/out/memory.md]
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

BIG = 64 * 1024  # blocks at least this large are counted apart
WIDE, DEPTH, ADAM_BATCH = 4096, 4, 32
CNN_BATCH, MLP_BATCH = 64, 128
MLP_SIZES = (784, 512, 512, 10)
LR = 0.01

_COUNTER_C = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
static unsigned long long counts[3];  /* blocks, bytes, blocks >= BIG */
static int counting;
static void note(void *p) {
    if (!counting || !p) return;
    size_t n = malloc_usable_size(p);
    __atomic_add_fetch(&counts[0], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&counts[1], n, __ATOMIC_RELAXED);
    if (n >= BIG) __atomic_add_fetch(&counts[2], 1, __ATOMIC_RELAXED);
}
void *malloc(size_t n) { void *p = __libc_malloc(n); note(p); return p; }
void *calloc(size_t a, size_t b) { void *p = __libc_calloc(a, b); note(p); return p; }
void *realloc(void *q, size_t n) { void *p = __libc_realloc(q, n); note(p); return p; }
void free(void *p) { __libc_free(p); }
void *memalign(size_t a, size_t n) { void *p = __libc_memalign(a, n); note(p); return p; }
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
void *valloc(size_t n) { return memalign(4096, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    void *p = memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void alloc_counting(int on) { counting = on; }
void alloc_counts(unsigned long long *out) { out[0] = counts[0]; out[1] = counts[1];
                                             out[2] = counts[2]; }
"""


# ---- measuring, inside the child process --------------------------------------------------

def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class _Counter:
    """The LD_PRELOAD counter's totals, or None without it."""

    def __init__(self):
        self.lib = None
        if os.environ.get("SPMD_BENCH_COUNTER"):
            import ctypes

            self.lib = ctypes.CDLL(os.environ["SPMD_BENCH_COUNTER"])
            self._buf = (ctypes.c_ulonglong * 3)()

    def measure(self, step, steps: int):
        """(bytes, blocks >= BIG) allocated per call of `step`, or (None, None)."""
        if self.lib is None:
            for _ in range(steps):
                step()
            return None, None
        self.lib.alloc_counts(self._buf)
        before = list(self._buf)
        self.lib.alloc_counting(1)
        for _ in range(steps):
            step()
        self.lib.alloc_counting(0)
        self.lib.alloc_counts(self._buf)
        return ((self._buf[1] - before[1]) / steps, (self._buf[2] - before[2]) / steps)


def _numpy_transient(step) -> float:
    """The step's peak of traced (numpy data and Python) memory above its start, in bytes."""
    import tracemalloc

    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        step()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


def _data(case: str):
    import numpy as np

    rng = np.random.default_rng(0)
    if case == "adam64m":
        return (rng.standard_normal((ADAM_BATCH, WIDE)).astype("float32"),
                rng.standard_normal((ADAM_BATCH, WIDE)).astype("float32"))
    if case == "cnn":
        return (rng.standard_normal((CNN_BATCH, 1, 28, 28)).astype("float32"),
                rng.integers(0, 10, size=(CNN_BATCH, 1)).astype("int64"))
    return (rng.standard_normal((MLP_BATCH, MLP_SIZES[0])).astype("float32"),
            rng.integers(0, MLP_SIZES[-1], size=(MLP_BATCH, 1)).astype("int64"))


def _spmd_step(case: str, framework: str):
    import spmd.fluid as fluid

    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        if case == "adam64m":
            x = fluid.data("x", [None, WIDE], "float32")
            y = fluid.data("y", [None, WIDE], "float32")
            h = x
            for i in range(DEPTH):
                h = fluid.layers.fc(h, WIDE, act="relu" if i < DEPTH - 1 else None)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(h, y))
            fluid.optimizer.Adam(LR).minimize(loss)
        else:
            if case == "cnn":
                x = fluid.data("x", [None, 1, 28, 28], "float32")
                h = x
                for filters in (32, 64):
                    h = fluid.nets.simple_img_conv_pool(
                        input=h, num_filters=filters, filter_size=5, pool_size=2,
                        pool_stride=2, act="relu")
                logits = fluid.layers.fc(h, 10)
            else:
                x = fluid.data("x", [None, MLP_SIZES[0]], "float32")
                h = x
                for size in MLP_SIZES[1:-1]:
                    h = fluid.layers.fc(h, size, act="relu")
                logits = fluid.layers.fc(h, MLP_SIZES[-1])
            y = fluid.data("y", [None, 1], "int64")
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
            fluid.optimizer.SGD(LR).minimize(loss)
    strategy = fluid.BuildStrategy()
    strategy.enable_inplace = strategy.memory_optimize = framework == "spmd"
    compiled = fluid.CompiledProgram(main, build_strategy=strategy)
    if framework == "spmd-plain":  # Executor.run on the program: the defaults
        compiled = main
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    xs, ys = _data(case)
    feed = {"x": xs, "y": ys}

    def step():
        return float(exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)[0][0])
    return step


def _torch_step(case: str):
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(1)
    xs, ys = (torch.from_numpy(a) for a in _data(case))
    if case == "adam64m":
        layers = []
        for i in range(DEPTH):
            layers.append(nn.Linear(WIDE, WIDE))
            if i < DEPTH - 1:
                layers.append(nn.ReLU())
        model = nn.Sequential(*layers)
        opt = torch.optim.Adam(model.parameters(), lr=LR)
        loss_of = lambda out: F.mse_loss(out, ys)  # noqa: E731
    else:
        if case == "cnn":
            model = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
                                  nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
                                  nn.Flatten(), nn.Linear(64 * 4 * 4, 10))
        else:
            a, b, c, d = MLP_SIZES
            model = nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, c), nn.ReLU(),
                                  nn.Linear(c, d))
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        target = ys[:, 0]
        loss_of = lambda out: F.cross_entropy(out, target)  # noqa: E731

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model(xs))
        loss.backward()
        opt.step()
        return loss.item()
    return step


def child(case: str, framework: str, steps: int) -> dict:
    import numpy  # noqa: F401  (in the base for every framework)

    if framework == "torch":
        import torch  # noqa: F401
    else:
        import spmd.fluid  # noqa: F401
    base = _status_kib("VmRSS")
    step = _torch_step(case) if framework == "torch" else _spmd_step(case, framework)
    for _ in range(steps):
        loss = step()
    peak = _status_kib("VmHWM")  # before any measuring tool runs
    alloc_bytes, big_blocks = _Counter().measure(step, steps)
    transient = None if framework == "torch" else _numpy_transient(step)
    return {"peak_kib": peak, "base_kib": base, "loss": loss, "alloc_bytes": alloc_bytes,
            "big_blocks": big_blocks, "transient_bytes": transient}


# ---- the parent: one fresh process per (case, framework) ----------------------------------

def _counter_library(tmp: str) -> str | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src, lib = os.path.join(tmp, "count.c"), os.path.join(tmp, "libcount.so")
    with open(src, "w") as f:
        f.write(_COUNTER_C)
    done = subprocess.run([cc, "-O2", "-shared", "-fPIC", f"-DBIG={BIG}", "-o", lib, src],
                          capture_output=True, text=True)
    return lib if done.returncode == 0 else None


def _have_torch() -> bool:
    done = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True)
    return done.returncode == 0


def _run_child(case, framework, steps, counter):
    env = dict(os.environ)
    if counter:
        env["LD_PRELOAD"] = counter
        env["SPMD_BENCH_COUNTER"] = counter
    done = subprocess.run([sys.executable, __file__, "--child", case, framework,
                           "--steps", str(steps)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{case}/{framework} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _mib(kib_or_bytes, unit=1024):
    return "-" if kib_or_bytes is None else f"{kib_or_bytes / unit:.1f}"


def report(cases, steps, frameworks) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        counter = _counter_library(tmp)
        results = {(c, f): _run_child(c, f, steps, counter) for c in cases for f in frameworks}
    lines = ["| case | framework | peak RSS MiB | base MiB | peak above base MiB | "
             "vs torch (peak) | vs torch (above base) | MiB allocated/step | "
             "blocks >= 64 KiB/step | numpy transient MiB/step |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in cases:
        ref = results.get((c, "torch"))
        for f in frameworks:
            r = results[(c, f)]
            above = r["peak_kib"] - r["base_kib"]
            ratio = ratio_above = "-"
            if ref is not None:
                ratio = f"{r['peak_kib'] / ref['peak_kib']:.2f}x"
                ratio_above = f"{above / (ref['peak_kib'] - ref['base_kib']):.2f}x"
            blocks = "-" if r["big_blocks"] is None else f"{r['big_blocks']:.0f}"
            lines.append(f"| {c} | {f} | {_mib(r['peak_kib'])} | {_mib(r['base_kib'])} | "
                         f"{_mib(above)} | {ratio} | {ratio_above} | "
                         f"{_mib(r['alloc_bytes'], 2**20)} | {blocks} | "
                         f"{_mib(r['transient_bytes'], 2**20)} |")
    notes = [f"{steps} steps then {steps} counted steps per process; "
             f"{'allocations counted by an LD_PRELOAD malloc counter' if counter else 'no C compiler: allocations not counted'}"]  # noqa: E501
    return "\n".join(lines + [""] + notes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="adam64m,cnn,mlp")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--frameworks", default="torch,spmd,spmd-plain,spmd-off")
    parser.add_argument("--out", default=None)
    parser.add_argument("--child", nargs=2, metavar=("CASE", "FRAMEWORK"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, args.steps)))
        return
    frameworks = [f for f in args.frameworks.split(",") if f != "torch" or _have_torch()]
    text = report(args.cases.split(","), args.steps, frameworks)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
