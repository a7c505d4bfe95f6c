"""One command for every benchmark: runs each bench/ script against its reference and writes a
Markdown report with plots.

    python bench/report.py [--quick] [--out-dir bench/out] [--only NAME ...] [--skip NAME ...]
                           [--readme]

What it does, in one run:
1. the suite: every bench script (step, data_parallel, fusion, sequence, cnn, memory,
   startup, pserver, hierarchical_model, check_nan_inf, ssa) with its own reference (hand-written
   numpy, raw mpi4py, PyTorch eager where installed), each writing bench/out/<name>.md;
   a bench that fails is reported as failed with the end of its output, the others go on;
2. its own sweeps of the MLP of bench/mlp.py (784-512-512-10, SGD, 1 BLAS thread), each
   interleaved in rounds so machine noise hits every column alike, medians reported:
   - step time vs batch size: spmd, the same step by hand in numpy, PyTorch eager;
   - scaling over 1, 2 and 4 ranks (mpiexec, batch 128 per rank: weak scaling): spmd's
     data-parallel step vs the numpy step plus one raw mpi4py Allreduce;
   - the compute / comm issue / comm wait breakdown of a 2-rank step, from the profiler's
     traces merged on one clock (spmd.timeline), and the collectives' own run time (on the
     communicator's thread, overlapping compute);
   - peak resident memory (VmHWM) of a fresh process training the MLP, spmd vs PyTorch, per
     batch size;
3. bench/out/report.md: the headline table, the plots (PNG, matplotlib) and every bench's
   report; `--readme` also puts the headline table into README.md between its markers.

PyTorch is used when importable (e.g. PYTHONPATH=/path/to/site-packages-with-torch); paths
outside this venv are moved behind it so numpy stays the venv's own.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent
README_BEGIN, README_END = "<!-- bench-report:begin -->", "<!-- bench-report:end -->"

# name, arguments for --quick, arguments for a full run
SUITE = [
    ("step", ["--rounds", "5", "--steps", "10"], []),
    ("data_parallel", ["--rounds", "5", "--steps", "5"], []),
    ("fusion", ["--rounds", "5", "--steps", "5"], []),
    ("sequence", ["--rounds", "3", "--steps", "5"], []),
    ("cnn", ["--quick"], []),
    ("memory", ["--steps", "2"], []),
    ("startup", ["--rounds", "3"], ["--rounds", "7"]),
    ("pserver", ["--steps", "20"], []),
    ("hierarchical_model", [], []),
    ("check_nan_inf", ["--rounds", "5", "--steps", "10"], []),
    ("ssa", ["--rounds", "3", "--steps", "5"], []),
]


def _torch_behind_venv() -> None:
    """Site-packages from outside this venv (PYTHONPATH) go after the venv's own, so torch
    can be found there without its numpy replacing ours."""
    venv = str(pathlib.Path(sys.prefix).resolve())
    outside = [p for p in sys.path if "site-packages" in p and not p.startswith(venv)]
    sys.path[:] = [p for p in sys.path if p not in outside] + outside


def _torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


# -- the MLP in three frameworks -----------------------------------------------------------------
def _data(batch: int):
    import numpy as np
    from mlp import SIZES

    rng = np.random.default_rng(0)
    return (rng.standard_normal((batch, SIZES[0])).astype("float32"),
            rng.integers(0, SIZES[-1], size=(batch, 1)).astype("int64"))


def _spmd_step(batch: int):
    from mlp import build

    import spmd.fluid as fluid

    x, y = _data(batch)
    main, startup, loss = build()
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    feed = {"x": x, "y": y}
    return lambda: exe.run(main, feed=feed, fetch_list=[loss], scope=scope), scope


def _numpy_step(batch: int, scope):
    from mlp import numpy_grads, params_of, sgd

    x, y = _data(batch)
    params = params_of(scope)

    def run():
        _, grads = numpy_grads(params, x, y, len(y))
        sgd(params, grads)
    return run


def _torch_step(torch, batch: int):
    from mlp import LR, SIZES

    x, y = _data(batch)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y[:, 0])
    layers = []
    for a, b in zip(SIZES, SIZES[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    def run():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(tx), ty).backward()
        opt.step()
    return run


def _interleaved(fns: dict, rounds: int, steps: int, barrier=None) -> dict:
    """Median ms per call of each fn, all timed in turn within every round."""
    from mlp import timed

    for fn in fns.values():
        for _ in range(2):
            fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            if barrier is not None:
                barrier()
            times[name].append(timed(fn, steps))
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


# -- workers (each in a process of its own) ---------------------------------------------------
def worker_batch(args) -> dict:
    torch = _torch()
    rows = []
    for batch in args.batches:
        spmd_run, scope = _spmd_step(batch)
        fns = {"spmd": spmd_run, "numpy": _numpy_step(batch, scope)}
        if torch is not None:
            fns["torch"] = _torch_step(torch, batch)
        rows.append({"batch": batch, **_interleaved(fns, args.rounds, args.steps)})
    return {"rows": rows}


def worker_scaling(args) -> dict | None:
    from data_parallel import mlp_on_rank, reference_step
    from mlp import params_of
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    dp = mlp_on_rank(comm)
    params = params_of(dp.scope)
    got = _interleaved({
        "spmd": dp.step,
        "reference": lambda: reference_step(params, dp.x, dp.y, comm, MPI)},
        args.rounds, args.steps, barrier=comm.Barrier)
    return {"ranks": comm.size, **got} if comm.rank == 0 else None


def worker_breakdown(args) -> dict | None:
    from data_parallel import mlp_on_rank
    from mpi4py import MPI

    import spmd.fluid.profiler as profiler
    import spmd.timeline as timeline

    comm = MPI.COMM_WORLD
    dp = mlp_on_rank(comm)
    for _ in range(2):
        dp.step()
    comm.Barrier()
    with profiler.profiler("CPU", "total", args.trace):
        for _ in range(args.steps):
            dp.step()
    comm.Barrier()
    if comm.rank:
        return None
    totals: dict = {}
    for e in timeline.merge([args.trace])["traceEvents"]:
        if e.get("ph") == "X":
            key = (e["pid"], e.get("cat"))
            totals[key] = totals.get(key, 0.0) + e["dur"] / 1e3  # ms
    ranks = []
    for r in range(comm.size):
        step = totals.get((r, "run"), 0.0) / args.steps
        issue = totals.get((r, "comm issue"), 0.0) / args.steps
        wait = totals.get((r, "comm wait"), 0.0) / args.steps
        ranks.append({"rank": r, "step": step, "compute": max(0.0, step - issue - wait),
                      "issue": issue, "wait": wait,
                      "comm_run": totals.get((r, "comm run"), 0.0) / args.steps})
    return {"ranks": ranks}


def worker_memory(args) -> dict:
    """Peak RSS (MiB) of this fresh process after a few steps of one framework."""
    torch = _torch() if args.framework == "torch" else None
    if args.framework == "torch":
        run = _torch_step(torch, args.batch)
    else:
        run, _ = _spmd_step(args.batch)
    for _ in range(args.steps):
        run()
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    return {"framework": args.framework, "batch": args.batch, "peak_mib": peak / 1024}


WORKERS = {"batch": worker_batch, "scaling": worker_scaling, "breakdown": worker_breakdown,
           "memory": worker_memory}


# -- the driver -------------------------------------------------------------------------------
def _env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "bench"), str(ROOT),
                                                      env.get("PYTHONPATH", "")]))
    return env


def _run_worker(kind: str, extra: list[str], ranks: int | None = None, timeout: int = 900):
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--worker", kind, *extra]
    if ranks is not None:
        cmd = [str(BIN / "mpiexec"), "-n", str(ranks), *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1])


def run_suite(names: list[str], quick: bool, out_dir: pathlib.Path) -> list[dict]:
    results = []
    for name, quick_args, full_args in SUITE:
        if name not in names:
            continue
        out = out_dir / f"{name}.md"
        cmd = [sys.executable, str(ROOT / "bench" / f"{name}.py"),
               *(quick_args if quick else full_args), "--out", str(out)]
        print(f"report: {name} ...", flush=True)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(),
                                  timeout=600 if quick else 3600)
            ok, tail = proc.returncode == 0, (proc.stdout + proc.stderr)[-1500:]
        except subprocess.TimeoutExpired:
            ok, tail = False, "timed out"
        results.append({"name": name, "ok": ok and out.exists(), "seconds": time.monotonic() - t0,
                        "tail": tail, "out": out})
    return results


def measure(quick: bool, out_dir: pathlib.Path) -> dict:
    rounds, steps = ("3", "5") if quick else ("9", "10")
    batches = ["32", "128", "512"] if quick else ["16", "32", "64", "128", "256", "512", "1024"]
    got: dict = {}
    print("report: step vs batch size ...", flush=True)
    got["batch"] = _run_worker("batch", ["--rounds", rounds, "--steps", steps,
                                         "--batches", *batches])["rows"]
    print("report: scaling over 1, 2, 4 ranks ...", flush=True)
    got["scaling"] = [_run_worker("scaling", ["--rounds", rounds, "--steps", steps], ranks=n)
                      for n in (1, 2, 4)]
    print("report: 2-rank breakdown ...", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        got["breakdown"] = _run_worker(
            "breakdown", ["--steps", steps, "--trace", os.path.join(tmp, "profile")],
            ranks=2)["ranks"]
    print("report: peak memory ...", flush=True)
    frameworks = ["spmd"] + (["torch"] if _torch() is not None else [])
    got["memory"] = [_run_worker("memory", ["--framework", fw, "--batch", b, "--steps", "3"])
                     for b in batches for fw in frameworks]
    return got


def plot(got: dict, out_dir: pathlib.Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=100)
        plt.close(fig)
        files.append(name)

    rows = got["batch"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for col in ("spmd", "numpy", "torch"):
        if col in rows[0]:
            ax.plot([r["batch"] for r in rows], [r[col] for r in rows], marker="o", label=col)
    ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="ms per step",
           title="MLP step vs batch size (1 thread)")
    ax.legend()
    save(fig, "step_vs_batch.png")

    sc = got["scaling"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for col in ("spmd", "reference"):
        ax.plot([r["ranks"] for r in sc], [r[col] for r in sc], marker="o",
                label=col if col == "spmd" else "numpy + raw Allreduce")
    ax.set(xlabel="ranks (batch 128 each)", ylabel="ms per step", xticks=[1, 2, 4],
           title="weak scaling, 2 CPUs (4 ranks oversubscribed)")
    ax.legend()
    save(fig, "scaling.png")

    br = got["breakdown"]
    fig, ax = plt.subplots(figsize=(6, 4))
    labels = [f"rank {r['rank']}" for r in br]
    bottom = [0.0] * len(br)
    for part in ("compute", "issue", "wait"):
        vals = [r[part] for r in br]
        ax.bar(labels, vals, bottom=bottom, label=f"{part}" if part == "compute"
               else f"comm {part}")
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.scatter(labels, [r["comm_run"] for r in br], color="k", zorder=3,
               label="comm run (own thread, overlaps)")
    ax.set(ylabel="ms per step", title="2-rank step: where the time goes")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, fontsize="small")
    save(fig, "breakdown.png")

    mem = got["memory"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for fw in sorted({m["framework"] for m in mem}):
        pts = [m for m in mem if m["framework"] == fw]
        ax.plot([m["batch"] for m in pts], [m["peak_mib"] for m in pts], marker="o", label=fw)
    ax.set(xscale="log", xlabel="batch size", ylabel="peak RSS (MiB)",
           title="MLP training: peak resident memory")
    ax.legend()
    save(fig, "memory.png")
    return files


def headline(got: dict) -> str:
    """The table the README shows."""
    lines = ["| measure | spmd | reference | ratio |", "|---|---|---|---|"]
    at = next((r for r in got["batch"] if r["batch"] == 128), got["batch"][0])
    b = at["batch"]
    lines.append(f"| MLP step, batch {b}, vs numpy by hand | {at['spmd']:.2f} ms | "
                 f"{at['numpy']:.2f} ms | **{at['spmd'] / at['numpy']:.2f}** |")
    if "torch" in at:
        lines.append(f"| MLP step, batch {b}, vs PyTorch eager | {at['spmd']:.2f} ms | "
                     f"{at['torch']:.2f} ms | **{at['spmd'] / at['torch']:.2f}** |")
    for r in got["scaling"]:
        lines.append(f"| data parallel, {r['ranks']} rank(s), vs numpy + raw Allreduce | "
                     f"{r['spmd']:.2f} ms | {r['reference']:.2f} ms | "
                     f"**{r['spmd'] / r['reference']:.2f}** |")
    one, ref_one = got["scaling"][0]["spmd"], got["scaling"][0]["reference"]
    for r in got["scaling"][1:]:
        lines.append(f"| weak-scaling efficiency, {r['ranks']} ranks on {os.cpu_count()} CPUs | "
                     f"{one / r['spmd']:.2f} | {ref_one / r['reference']:.2f} | |")
    br = got["breakdown"][0]
    if br["step"]:
        lines.append(f"| 2-rank step: comm issue + wait share (rank 0) | "
                     f"{(br['issue'] + br['wait']) / br['step']:.0%} | | |")
    by = {(m["framework"], m["batch"]): m["peak_mib"] for m in got["memory"]}
    if ("torch", b) in by:
        lines.append(f"| peak RSS of the training process (imports included), MLP batch {b}, "
                     f"vs PyTorch | {by[('spmd', b)]:.0f} MiB | "
                     f"{by[('torch', b)]:.0f} MiB | **{by[('spmd', b)] / by[('torch', b)]:.2f}** |")
    return "\n".join(lines)


def write(got: dict, plots: list[str], suite: list[dict], quick: bool,
          out_dir: pathlib.Path) -> str:
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    parts = [
        "# spmd benchmark report", "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {rev}, "
        f"{platform.machine()} {os.cpu_count()} CPUs, load {load:.2f}, "
        f"{'quick' if quick else 'full'} run. 1 BLAS thread per process; columns interleaved "
        f"in rounds, medians. Ratios are the figures to quote (the machine is shared).", "",
        "## Headline", "", headline(got), "",
        "## Plots", "", *[f"![{p}]({p})" for p in plots], "",
        "## Step time vs batch size (ms)", "",
        "| batch | " + " | ".join(k for k in got["batch"][0] if k != "batch") + " |",
        "|---" * len(got["batch"][0]) + "|",
        *["| " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v)
                            for v in r.values()) + " |" for r in got["batch"]], "",
        "## 2-rank breakdown (ms per step)", "",
        "| rank | step | compute | comm issue | comm wait | comm run (overlapping) |",
        "|---|---|---|---|---|---|",
        *[f"| {r['rank']} | {r['step']:.2f} | {r['compute']:.2f} | {r['issue']:.2f} | "
          f"{r['wait']:.2f} | {r['comm_run']:.2f} |" for r in got["breakdown"]], "",
        "## The benches", "",
        "| bench | status | seconds |", "|---|---|---|",
        *[f"| [{s['name']}]({s['name']}.md) | {'ok' if s['ok'] else 'FAILED'} | "
          f"{s['seconds']:.0f} |" for s in suite], "",
    ]
    for s in suite:
        parts.append(f"### {s['name']}")
        parts.append("")
        if s["ok"]:
            parts.append(s["out"].read_text().replace("\n# ", "\n#### "))
        else:
            parts += ["failed; the end of its output:", "", "```", s["tail"], "```"]
        parts.append("")
    text = "\n".join(parts)
    (out_dir / "report.md").write_text(text)
    return text


def update_readme(table: str) -> None:
    path = ROOT / "README.md"
    text = path.read_text()
    if README_BEGIN not in text:
        raise SystemExit(f"README.md has no {README_BEGIN} ... {README_END} block")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    path.write_text(f"{head}{README_BEGIN}\n{table}\n{README_END}{tail}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds and sizes (~10 min)")
    p.add_argument("--out-dir", default=str(ROOT / "bench" / "out"))
    p.add_argument("--only", nargs="*", help="run only these benches of the suite")
    p.add_argument("--skip", nargs="*", default=[], help="leave these benches out")
    p.add_argument("--readme", action="store_true", help="put the headline table in README.md")
    p.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=5, help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, default=5, help=argparse.SUPPRESS)
    p.add_argument("--batches", type=int, nargs="*", default=[128], help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=128, help=argparse.SUPPRESS)
    p.add_argument("--framework", default="spmd", help=argparse.SUPPRESS)
    p.add_argument("--trace", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        _torch_behind_venv()
        sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
        result = WORKERS[args.worker](args)
        if result is not None:
            print(json.dumps(result), flush=True)
        return 0
    _torch_behind_venv()
    sys.path[:0] = [str(ROOT / "bench")]
    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [n for n, _, _ in SUITE if (not args.only or n in args.only) and n not in args.skip]
    suite = run_suite(names, args.quick, out_dir)
    got = measure(args.quick, out_dir)
    plots = plot(got, out_dir)
    write(got, plots, suite, args.quick, out_dir)
    table = headline(got)
    print(f"\n{table}\n\nreport: {out_dir / 'report.md'}", flush=True)
    if args.readme:
        update_readme(table)
    return 0 if all(s["ok"] for s in suite) else 1


if __name__ == "__main__":
    sys.exit(main())
