"""A sparse step against its table's size: step time and memory for SGD and lazy Adam, in one
process, 2 ranks data parallel and parameter-server mode, against PyTorch's sparse Embedding.

The model (issue 24's): a batch of 64 ids per process, `embedding(size=[rows, 64],
is_sparse=True)`, fc to 10 classes, softmax cross-entropy, mean; float32, CPU, one BLAS
thread per process. The optimizer is SGD or Adam(lazy_mode=True) (fluid's sparse Adam: only
the looked-up rows and their moments move). Every case runs in fresh processes:

- `1proc`: Executor.run of the program in one process;
- `dp2`: `mpiexec -n 2`, CompiledProgram.with_data_parallel (the table's gradient gathered by
  rows, c_allgather_rows), 64 ids per rank;
- `ps`: `paddle-launch --server_num 2 --worker_num 2`: DistributeTranspiler in sync mode, the
  table cut across both pservers (fluid 1.8's slice_variable), its rows prefetched by
  distributed_lookup_table, each trainer sending only its rows; 64 ids per trainer;
- `torch`: PyTorch eager, nn.Embedding(sparse=True) + nn.Linear, SGD, or SparseAdam on the
  table with Adam on the fc; only where torch imports (it is never a dependency of spmd:
  `--torch-path DIR` names a folder holding it, e.g. made by
  `pip install --target DIR torch`, put on the torch runs' path only).

Per case: the median step time over `--steps` steps after `--warmup` (the goals also show
the fastest step's ratio: on a shared machine it is the step least delayed by other
processes, the median the honest figure of a step); the peak resident set
of the process (VmHWM, the whole process: interpreter, libraries, table, optimizer state);
and the step's memory growth: the peak resident set over the timed steps above the resident
set before them (the kernel's peak counter is reset through /proc/self/clear_refs after the
warm-up), i.e. what a step allocates beyond what the process holds between steps. For `ps`
the figures are the worst trainer's time and growth, the pservers' peak (they hold the table)
and `ps_rows` the rows each trainer sent per step (spmd.ps.rpc.client_rows(): what
moved, against the table's rows).

The ratios of the goals come from paired runs, not from the separate cases above: one
process (one per rank for dp2) holds the 10k-row and the 1M-row model (and, for 1proc, PyTorch's
at 1M rows where torch imports), and times one step of each in turn, round after round
(`--rounds`, the order reversed every other round, so a busy stretch of the machine slows both
alike); the ratio is the median of the rounds' own ratios, printed with its quartiles (how
stable it is). A sub-millisecond step's median moves tens of percent between separate runs on
a shared machine; the paired ratio does not. dp2's round time is the slower rank's. ps is not
paired (a pserver job serves one program): its ratio is of the separate cases' medians.

`--save-load` (1proc) also saves the trained table with its optimizer state
(fluid.io.save_persistables) and loads it back, and prints the peak resident set each adds
above the resident set before it: a stream adds O(a chunk), a second copy of the table adds
the table. Each 1proc case prints `over`: its peak above the import baseline, the table and
the optimizer's table-sized state (issue 24, item 4: peak <= that + O(batch)).

Goals (issue 24), checked in the same run and printed with whether each holds:
- the 1M-row step <= 1.5x the 10k-row step (each mode and optimizer);
- <= 2x PyTorch at 1M rows (1proc against torch, SGD against SGD, lazy Adam against
  SparseAdam);
- step memory growth <= 2 MB at 200k rows (every mode and optimizer).

Quick (the default): tables of 10k, 200k and 1M rows. Full: add 100k and 10M rows
(`--full`; the 10M-row table is 2.5 GB, lazy Adam 7.5 GB with its moments: 10M runs only
1proc and ps, never dp2 (two full copies), and needs about 10 GB free):

    python bench/sparse.py [--steps 30] [--warmup 5] [--rounds 300] [--out bench/out/sparse.md]
    python bench/sparse.py --torch-path /path/to/torch-target --full
    python bench/sparse.py --sizes 10000,1000000 --modes 1proc,torch --opts sgd
    python bench/sparse.py --sizes 10000000 --modes 1proc --opts lazy_adam --save-load --rounds 0
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
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
BATCH, DIM, CLASSES = 64, 64, 10
SGD_LR, ADAM_LR = 0.1, 0.01
QUICK_SIZES = (10_000, 200_000, 1_000_000)
FULL_SIZES = (10_000, 100_000, 200_000, 1_000_000, 10_000_000)
MODES = ("1proc", "dp2", "ps", "torch")
PAIRED_MODES = ("1proc", "dp2")  # ps is not paired: see the module doc
OPTS = ("sgd", "lazy_adam")
MEMORY_ROWS = 200_000  # the table of the memory goal
PAIR_SIZES = (10_000, 1_000_000)  # the tables of the step-time goals, timed in pairs
TRAINERS, SERVERS = 2, 2
CHILD_TIMEOUT_S = 900


# -- measuring ------------------------------------------------------------------------------
def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak() -> bool:
    """Reset VmHWM to the current resident set (Linux's clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure(step, warmup: int, steps: int) -> dict:
    """Step times and the step's memory growth (see the module doc)."""
    for _ in range(warmup):
        step()
    reset = reset_peak()
    before = status_kib("VmRSS")
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    growth = (status_kib("VmHWM") - before) if reset else float("nan")
    return {"ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3,
            "growth_mib": growth / 1024.0, "peak_mib": status_kib("VmHWM") / 1024.0}


def batches(rows: int, seed: int):
    rng = np.random.default_rng(seed)
    while True:
        yield {"ids": rng.integers(0, rows, (BATCH, 1)).astype(np.int64),
               "y": rng.integers(0, CLASSES, (BATCH, 1)).astype(np.int64)}


def build(rows: int, opt: str):
    import spmd.fluid as fluid

    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, 1], "int64")
        y = fluid.data("y", [None, 1], "int64")
        emb = fluid.layers.embedding(ids, size=[rows, DIM], is_sparse=True)
        logits = fluid.layers.fc(emb, CLASSES)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        if opt == "sgd":
            fluid.optimizer.SGD(SGD_LR).minimize(loss)
        else:
            fluid.optimizer.Adam(ADAM_LR, lazy_mode=True).minimize(loss)
    return main, startup, loss


# -- the children ---------------------------------------------------------------------------
def spmd_case(rows: int, opt: str, mode: str, seed: int):
    """(one step of the spmd model, exe, main, scope), its startup run (dp2: the data-parallel
    program, `seed` the rank's batches)."""
    import spmd.fluid as fluid

    main, startup, loss = build(rows, opt)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    prog = main
    if mode == "dp2":
        prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    feeds = batches(rows, seed)
    return (lambda: exe.run(prog, feed=next(feeds), fetch_list=[loss], scope=scope),
            exe, main, scope)


def table_state_mib(rows: int, opt: str) -> float:
    """The table and the optimizer's arrays of its size (lazy Adam's two moments), in MiB."""
    return rows * DIM * 4 * (3 if opt == "lazy_adam" else 1) / 2**20


def save_load_growth(exe, main, scope) -> dict:
    """The peak resident set that fluid.io.save_persistables and load_persistables of the
    model (its table and optimizer state) each add above the resident set before them, in
    MiB, and their seconds; the files go to a temporary folder (SPMD_BENCH_TMP, else the
    system's)."""
    import spmd.fluid as fluid

    out = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("SPMD_BENCH_TMP")) as tmp, \
            fluid.scope_guard(scope):
        for what, fn in (("save", fluid.io.save_persistables),
                         ("load", fluid.io.load_persistables)):
            reset = reset_peak()
            before = status_kib("VmRSS")
            t0 = time.perf_counter()
            fn(exe, tmp, main)
            out[f"{what}_s"] = time.perf_counter() - t0
            out[f"{what}_mib"] = ((status_kib("VmHWM") - before) / 1024.0 if reset
                                  else float("nan"))
    return out


def child_local(args) -> dict:
    """1proc, or one rank of dp2 under mpiexec."""
    import spmd.fluid  # noqa: F401  (the import baseline includes spmd's)

    base = status_kib("VmRSS") / 1024.0
    rank, size = 0, 1
    if args.mode == "dp2":
        from mpi4py import MPI

        rank, size = MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size
    step, exe, main, scope = spmd_case(args.rows, args.opt, args.mode, 100 + rank)
    out = measure(step, args.warmup, args.steps)
    out["base_mib"] = base
    out["over_mib"] = out["peak_mib"] - base - table_state_mib(args.rows, args.opt)
    if args.save_load and size == 1:
        out.update(save_load_growth(exe, main, scope))
    if size > 1:
        from mpi4py import MPI

        every = MPI.COMM_WORLD.gather(out, root=0)
        if rank != 0:
            return {}
        out = {key: max(r[key] for r in every)
               for key in ("ms", "min_ms", "growth_mib", "peak_mib", "over_mib")}
        out["base_mib"] = base
    return out


def torch_case(rows: int, opt: str, torch_path: str | None):
    """One step of PyTorch's model (nn.Embedding(sparse=True) + nn.Linear, eager)."""
    if torch_path:
        sys.path.insert(0, torch_path)
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(1)
    emb = torch.nn.Embedding(rows, DIM, sparse=True)
    fc = torch.nn.Linear(DIM, CLASSES)
    if opt == "sgd":
        opts = [torch.optim.SGD(list(emb.parameters()) + list(fc.parameters()), lr=SGD_LR)]
    else:
        opts = [torch.optim.SparseAdam(list(emb.parameters()), lr=ADAM_LR),
                torch.optim.Adam(fc.parameters(), lr=ADAM_LR)]
    feeds = batches(rows, 100)

    def step():
        feed = next(feeds)
        ids = torch.from_numpy(feed["ids"].reshape(-1))
        y = torch.from_numpy(feed["y"].reshape(-1))
        loss = torch.nn.functional.cross_entropy(fc(emb(ids)), y)
        for o in opts:
            o.zero_grad()
        loss.backward()
        for o in opts:
            o.step()
        return float(loss)

    return step


def paired(steps: dict, warmup: int, rounds: int) -> dict:
    """Each case's step timed in turn, round after round (the order reversed every other
    round): {case: [seconds of its step in each round]}."""
    names = list(steps)
    for name in names:
        for _ in range(warmup):
            steps[name]()
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - t0)
    return times


def paired_ratio(a: list, b: list) -> dict:
    """The median and quartiles of the rounds' own ratios a[i] / b[i], with both medians."""
    ratios = sorted(x / y for x, y in zip(a, b))
    q1, med, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return {"ratio": med, "q1": q1, "q3": q3, "a_ms": statistics.median(a) * 1e3,
            "b_ms": statistics.median(b) * 1e3, "rounds": len(ratios)}


def child_paired(args) -> dict:
    """The paired rounds of one mode and optimizer (see the module doc): 1proc or one rank of
    dp2; the small and the big table, and PyTorch's big one where args.torch_path or an
    importable torch is given (1proc)."""
    import spmd.fluid  # noqa: F401

    small, big = PAIR_SIZES
    rank, size, inner = 0, 1, "1proc"
    if args.paired_mode == "dp2":
        from mpi4py import MPI

        rank, size, inner = MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size, "dp2"
    steps = {f"spmd {small}": spmd_case(small, args.opt, inner, 100 + rank)[0],
             f"spmd {big}": spmd_case(big, args.opt, inner, 100 + rank)[0]}
    if args.with_torch:
        steps[f"torch {big}"] = torch_case(big, args.opt, args.torch_path)
    times = paired(steps, args.warmup, args.rounds)
    if size > 1:  # a round's step is the slower rank's
        from mpi4py import MPI

        every = MPI.COMM_WORLD.gather(times, root=0)
        if rank != 0:
            return {}
        times = {name: [max(ts) for ts in zip(*(t[name] for t in every))] for name in times}
    out = {"big_small": paired_ratio(times[f"spmd {big}"], times[f"spmd {small}"])}
    if args.with_torch:
        out["torch"] = paired_ratio(times[f"spmd {big}"], times[f"torch {big}"])
    return out


def child_ps(args) -> dict:
    """One role of the pserver job (under paddle-launch); each writes its JSON file."""
    import spmd.fluid as fluid
    from spmd.ps.rpc import client_rows

    role = os.environ["PADDLE_TRAINING_ROLE"]
    endpoints = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"]
    trainers = int(os.environ["PADDLE_TRAINERS_NUM"])
    trainer_id = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
    main, startup, loss = build(args.rows, args.opt)
    exe = fluid.Executor(fluid.CPUPlace())
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id, program=main, pservers=endpoints, trainers=trainers,
                sync_mode=True, startup_program=startup)
    if role == "PSERVER":
        ep = os.environ["PADDLE_CURRENT_ENDPOINT"]
        ps_prog, ps_startup = t.get_pserver_programs(ep)
        exe.run(ps_startup)
        mark = {}
        watcher = threading.Thread(target=_after_warmup, args=(args.result_dir, trainers, mark),
                                   daemon=True)
        watcher.start()
        exe.run(ps_prog)  # serves every step of both trainers
        watcher.join(5)
        peak = status_kib("VmHWM")
        out = {"role": "pserver", "peak_mib": peak / 1024.0,
               "growth_mib": (peak - mark["rss"]) / 1024.0 if mark.get("reset")
               else float("nan")}
        name = f"pserver.{endpoints.split(',').index(ep)}.json"
    else:
        prog = t.get_trainer_program()
        exe.run(startup)
        feeds = batches(args.rows, 100 + trainer_id)
        for _ in range(args.warmup):
            exe.run(prog, feed=next(feeds), fetch_list=[loss])
        pathlib.Path(args.result_dir, f"warm.{trainer_id}").touch()  # the pservers' mark
        rows0 = client_rows()
        out = measure(lambda: exe.run(prog, feed=next(feeds), fetch_list=[loss]), 0,
                      args.steps)
        rows1 = client_rows()
        exe.close()
        out.update(role="trainer", rows_sent=(rows1["sent"] - rows0["sent"]) / args.steps,
                   rows_received=(rows1["received"] - rows0["received"]) / args.steps)
        name = f"trainer.{trainer_id}.json"
    with open(os.path.join(args.result_dir, name), "w") as f:
        json.dump(out, f)
    return {}


def _after_warmup(result_dir: str, trainers: int, mark: dict) -> None:
    """A pserver's mark: once every trainer ended its warm-up, reset the peak and note the
    resident set (the serving's start-up and first steps are not a step's growth)."""
    files = [pathlib.Path(result_dir, f"warm.{i}") for i in range(trainers)]
    end = time.monotonic() + CHILD_TIMEOUT_S
    while not all(f.exists() for f in files) and time.monotonic() < end:
        time.sleep(0.005)
    mark["reset"] = reset_peak()
    mark["rss"] = status_kib("VmRSS")


def child_torch(args) -> dict:
    if args.torch_path:
        sys.path.insert(0, args.torch_path)
    import torch  # noqa: F401  (the import baseline includes torch's)

    base = status_kib("VmRSS") / 1024.0
    step = torch_case(args.rows, args.opt, args.torch_path)
    out = measure(step, args.warmup, args.steps)
    out["base_mib"] = base
    return out


def have_torch(path: str | None) -> bool:
    code = (f"import sys; sys.path.insert(0, {path!r}); " if path else "") + "import torch"
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True)
    return probe.returncode == 0


# -- the driver -----------------------------------------------------------------------------
def _run(cmd, env=None) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                         cwd=ROOT, env=dict(os.environ, **(env or {})))
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out.stdout


def run_case(mode: str, rows: int, opt: str, args) -> dict:
    common = ["--rows", str(rows), "--opt", opt, "--steps", str(args.steps), "--warmup",
              str(args.warmup)]
    me = [sys.executable, __file__]
    if mode == "torch" and args.torch_path:
        common += ["--torch-path", args.torch_path]
    if mode == "1proc" and args.save_load:
        common.append("--save-load")
    if mode in ("1proc", "torch"):
        out = _run(me + ["--child", mode, *common])
        return json.loads(out.strip().splitlines()[-1])
    if mode == "dp2":
        mpiexec = pathlib.Path(sys.executable).parent / "mpiexec"
        out = _run([str(mpiexec) if mpiexec.exists() else "mpiexec", "-n", "2", *me,
                    "--child", "dp2", *common])
        return json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    with tempfile.TemporaryDirectory() as tmp:
        _run([sys.executable, "-m", "launch", "--server_num", str(SERVERS), "--worker_num",
              str(TRAINERS), "--log_dir", os.path.join(tmp, "log"), __file__, "--child", "ps",
              "--result_dir", tmp, *common], {"SPMD_PS_RPC_DEADLINE": "300"})
        trainers = [json.loads(pathlib.Path(tmp, f"trainer.{i}.json").read_text())
                    for i in range(TRAINERS)]
        servers = [json.loads(pathlib.Path(tmp, f"pserver.{i}.json").read_text())
                   for i in range(SERVERS)]
    return {"ms": max(t["ms"] for t in trainers), "min_ms": max(t["min_ms"] for t in trainers),
            "growth_mib": max(r["growth_mib"] for r in trainers + servers),
            "peak_mib": max(r["peak_mib"] for r in servers),
            "trainer_peak_mib": max(t["peak_mib"] for t in trainers),
            "rows_sent": statistics.mean(t["rows_sent"] for t in trainers),
            "rows_received": statistics.mean(t["rows_received"] for t in trainers)}


def run_paired(mode: str, opt: str, with_torch: bool, args) -> dict:
    cmd = [sys.executable, __file__, "--child", "paired", "--paired-mode", mode, "--opt", opt,
           "--rounds", str(args.rounds), "--warmup", str(args.warmup)]
    if with_torch:
        cmd.append("--with-torch")
        if args.torch_path:
            cmd += ["--torch-path", args.torch_path]
    if mode == "dp2":
        mpiexec = pathlib.Path(sys.executable).parent / "mpiexec"
        cmd = [str(mpiexec) if mpiexec.exists() else "mpiexec", "-n", "2", *cmd]
    out = _run(cmd)
    return json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])


def _paired_figures(p: dict, a: str, b: str) -> str:
    return (f"paired over {p['rounds']} rounds: median of the rounds' {a} / {b} "
            f"{p['ratio']:.2f}x (quartiles {p['q1']:.2f}-{p['q3']:.2f}; medians "
            f"{p['a_ms']:.3f} / {p['b_ms']:.3f} ms)")


def _ratio(a: dict, b: dict) -> tuple[float, str]:
    """a / b by median step, with the fastest steps' ratio beside it (on a shared machine the
    fastest step is the one least delayed by other processes)."""
    r = a["ms"] / b["ms"]
    return r, (f"{a['ms']:.3f} / {b['ms']:.3f} ms = {r:.2f}x; fastest steps "
               f"{a['min_ms']:.3f} / {b['min_ms']:.3f} ms = {a['min_ms'] / b['min_ms']:.2f}x")


def goals(results: dict, sizes, modes, opts,
          pairs: dict | None = None) -> list[tuple[str, bool | None, str]]:
    """(goal, holds (None: not measured), the figures); `pairs`: {(mode, opt): the paired
    run's ratios}, which the step-time goals use where they have one."""
    out = []
    pairs = pairs or {}
    small, big = PAIR_SIZES
    for mode in modes:
        if mode == "torch":  # the reference, not a goal of its own (its ratio is in the table)
            continue
        for opt in opts:
            goal = f"{mode} {opt}: 1M-row step <= 1.5x the 10k-row step"
            p = pairs.get((mode, opt))
            a, b = results.get((mode, small, opt)), results.get((mode, big, opt))
            if p:
                out.append((goal, p["big_small"]["ratio"] <= 1.5,
                            _paired_figures(p["big_small"], "1M", "10k")))
            elif a and b:
                r, figures = _ratio(b, a)
                out.append((goal, r <= 1.5, "separate runs (not paired): " + figures))
    for opt in opts:
        p = pairs.get(("1proc", opt), {}).get("torch")
        s, t = results.get(("1proc", big, opt)), results.get(("torch", big, opt))
        if p:
            out.append((f"1proc {opt}: <= 2x PyTorch at 1M rows", p["ratio"] <= 2.0,
                        _paired_figures(p, "spmd", "torch")))
        elif s and t:
            r, figures = _ratio(s, t)
            out.append((f"1proc {opt}: <= 2x PyTorch at 1M rows", r <= 2.0,
                        "separate runs (not paired): " + figures))
        elif s:
            out.append((f"1proc {opt}: <= 2x PyTorch at 1M rows", None, "torch not importable"))
    for mode in modes:
        if mode == "torch":
            continue
        for opt in opts:
            m = results.get((mode, MEMORY_ROWS, opt))
            if m:
                out.append((f"{mode} {opt}: step memory growth <= 2 MB at 200k rows",
                            m["growth_mib"] <= 2.0, f"{m['growth_mib']:.2f} MiB"))
    return out


def report(results: dict, sizes, modes, opts, args, pairs: dict | None = None) -> str:
    lines = ["# bench/sparse.py", "",
             f"embedding(is_sparse=True) [rows, {DIM}] -> fc {CLASSES} -> softmax "
             f"cross-entropy, {BATCH} ids per process, float32, CPU, 1 BLAS thread per "
             f"process; median ms of {args.steps} steps after {args.warmup}; peak = VmHWM "
             f"(MiB; ps: the pservers'), growth = the timed steps' peak above the resident "
             f"set before them (MiB; ps: the worst trainer or pserver); over = 1proc's peak "
             f"above the import baseline + table + its optimizer state (MiB); save / load = "
             f"the peak each adds (MiB, --save-load); ps rows = rows each trainer sent per "
             f"step.", "",
             "| mode | opt | " + " | ".join(f"{r:,} rows" for r in sizes) + " |",
             "|---|---|" + "---|" * len(sizes)]
    for mode in modes:
        for opt in opts:
            cells = []
            for rows in sizes:
                r = results.get((mode, rows, opt))
                if r is None:
                    cells.append("-")
                    continue
                cell = f"{r['ms']:.3f} ms, peak {r['peak_mib']:.0f}, +{r['growth_mib']:.2f}"
                if mode == "1proc" and "over_mib" in r:
                    cell += f", over {r['over_mib']:.0f}"
                if "save_mib" in r:
                    cell += (f", save +{r['save_mib']:.1f} ({r['save_s']:.1f} s), "
                             f"load +{r['load_mib']:.1f} ({r['load_s']:.1f} s)")
                if "rows_sent" in r:
                    cell += f", rows {r['rows_sent']:.0f}"
                cells.append(cell)
            name = {"sgd": "SGD", "lazy_adam": "lazy Adam"}[opt]
            if mode == "torch":
                name = {"sgd": "SGD", "lazy_adam": "SparseAdam"}[opt]
            lines.append(f"| {mode} | {name} | " + " | ".join(cells) + " |")
    lines += ["", "## Goals", ""]
    for goal, holds, figures in goals(results, sizes, modes, opts, pairs):
        mark = "not measured" if holds is None else ("holds" if holds else "FAILS")
        lines.append(f"- {goal}: **{mark}** ({figures})")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--full", action="store_true", help="also 100k and 10M rows")
    p.add_argument("--sizes", help="comma-separated table rows (overrides --full)")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--opts", default=",".join(OPTS))
    p.add_argument("--rounds", type=int, default=300,
                   help="paired rounds of the step-time goals (0: no paired runs)")
    p.add_argument("--save-load", action="store_true",
                   help="1proc: also the peak a save and a load of the model add")
    p.add_argument("--out")
    p.add_argument("--torch-path", help="a folder holding torch (pip install --target)")
    p.add_argument("--child", choices=MODES + ("paired",))
    p.add_argument("--paired-mode", choices=PAIRED_MODES)
    p.add_argument("--with-torch", action="store_true")
    p.add_argument("--rows", type=int)
    p.add_argument("--opt", choices=OPTS)
    p.add_argument("--result_dir")
    args = p.parse_args(argv)
    if args.child:
        fn = {"1proc": child_local, "dp2": child_local, "ps": child_ps,
              "torch": child_torch, "paired": child_paired}[args.child]
        args.mode = args.child
        out = fn(args)
        if out:
            print(json.dumps(out), flush=True)
        return 0
    sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes
             else list(FULL_SIZES if args.full else QUICK_SIZES))
    modes = [m for m in args.modes.split(",") if m]
    opts = [o for o in args.opts.split(",") if o]
    if "torch" in modes and not have_torch(args.torch_path):
        print("torch is not importable: its column is skipped", file=sys.stderr)
        modes.remove("torch")
    results, failed = {}, {}
    for rows in sizes:
        for mode in modes:
            if mode == "dp2" and rows > 2_000_000:
                continue  # two full tables (and moments) on one machine: see the module doc
            for opt in opts:
                t0 = time.perf_counter()
                try:
                    results[(mode, rows, opt)] = run_case(mode, rows, opt, args)
                except SystemExit as e:  # one case failing leaves the others to run
                    failed[(mode, rows, opt)] = str(e).splitlines()[-1][:200]
                    print(f"{mode} {rows} {opt} FAILED:\n{e}", file=sys.stderr, flush=True)
                    continue
                print(f"{mode} {rows} {opt}: {results[(mode, rows, opt)]} "
                      f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    pairs = {}
    for mode in (m for m in PAIRED_MODES if m in modes and args.rounds > 0):
        for opt in opts:
            t0 = time.perf_counter()
            try:
                pairs[(mode, opt)] = run_paired(mode, opt, mode == "1proc" and "torch" in modes,
                                                args)
            except SystemExit as e:
                failed[(mode, "paired", opt)] = str(e).splitlines()[-1][:200]
                print(f"{mode} paired {opt} FAILED:\n{e}", file=sys.stderr, flush=True)
                continue
            print(f"{mode} paired {opt}: {pairs[(mode, opt)]} "
                  f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    text = report(results, sizes, modes, opts, args, pairs)
    if failed:
        text += "\n\n## Failed cases\n\n" + "\n".join(
            f"- {m} {r if isinstance(r, str) else f'{r:,} rows'} {o}: {why}"
            for (m, r, o), why in failed.items())
    print(text)
    if args.out:
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
