"""Start-up cost: seconds from the command to the first finished training step, for
`paddle-launch --nproc_per_node 2`, `mpiexec -n 2` and a single process, beside a bare mpi4py
barrier job launched the same way (the floor: process manager, interpreter and MPI start-up).

The step is one data-parallel SGD step of a small MLP (spmd.fluid, with_data_parallel when
there are several ranks); rank 0 prints the wall-clock time when it is done, so pipe and
console latency do not count. Launch modes are interleaved in rounds so machine noise hits
them alike; medians are reported.

Python's bytecode caches are warm, as after `pip install` (the warm-up run writes them to a
temporary PYTHONPYCACHEPREFIX, also where the environment says PYTHONDONTWRITEBYTECODE);
`--bytecode none` measures every module compiled from source at every start instead.

Then where it goes, in the same run: what rank 0 of `mpiexec -n 2` had imported at its first
step (modules, spmd's, numpy's) and the operators its two programs hold, and `python -X
importtime -c "import spmd.fluid"` (cumulative; the modules that cost most by their own time).

    python bench/startup.py [--rounds 5] [--bytecode warm|none] [--out bench/out/startup.md]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent

STEP_SCRIPT = '''\
import time
import numpy as np
import spmd.fluid as fluid
from spmd.comm.topology import detect

topology = detect()
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    x = fluid.data("x", [None, 64], "float32")
    y = fluid.data("y", [None, 1], "int64")
    h = fluid.layers.fc(x, 64, act="relu")
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(fluid.layers.fc(h, 10), y))
    fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
exe.run(startup, scope=scope)
program = main
if topology.size > 1:
    program = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
rng = np.random.default_rng(topology.rank)
feed = {"x": rng.normal(size=(32, 64)).astype("float32"),
        "y": rng.integers(0, 10, size=(32, 1)).astype("int64")}
exe.run(program, feed=feed, fetch_list=[loss], scope=scope)
if topology.rank == 0:
    import sys
    groups = [name.partition(".")[0] for name in sys.modules]
    ops = sum(len(b.ops) for p in (main, startup) for b in p.blocks)
    print("FIRST_STEP", time.time(), len(sys.modules), groups.count("spmd"),
          groups.count("numpy"), ops, flush=True)
'''

BARRIER_SCRIPT = '''\
import time
from mpi4py import MPI
MPI.COMM_WORLD.Barrier()
if MPI.COMM_WORLD.Get_rank() == 0:
    import sys
    print("FIRST_STEP", time.time(), len(sys.modules), flush=True)
'''


UCX_OFF = ("barrier, UCX_MEM_EVENTS=no", "mpiexec -n 2")


def commands(script: str, log_dir: str) -> dict:
    launcher = BIN / "paddle-launch"
    launch = [str(launcher)] if launcher.exists() else [sys.executable, "-m", "launch"]
    return {
        "paddle-launch --nproc_per_node 2": [*launch, "--nproc_per_node", "2", "--log_dir",
                                             log_dir, "--print_config", "false", script],
        "mpiexec -n 2": [str(BIN / "mpiexec"), "-n", "2", sys.executable, script],
        "single process": [sys.executable, script],
    }


def measure(cmd: list[str], env: dict) -> tuple[float, float, int]:
    """(seconds to rank 0's FIRST_STEP, seconds to the command's exit, the modules rank 0 had
    imported by then: a count that machine load does not move)."""
    stamp = first_step_line(cmd, env)
    return stamp[0], stamp[1], int(stamp[2])


def first_step_line(cmd: list[str], env: dict) -> list[float]:
    """Rank 0's FIRST_STEP line as numbers, its time made relative to the start; the
    command's total seconds second: [first step s, total s, modules, (spmd's, numpy's, ops
    built)]."""
    start = time.time()
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    end = time.time()
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    stamps = [line.split() for line in out.stdout.splitlines()
              if line.startswith("FIRST_STEP")]
    if not stamps:
        raise RuntimeError(f"{' '.join(cmd)} printed no FIRST_STEP:\n{out.stdout[-2000:]}")
    return [float(stamps[0][1]) - start, end - start, *map(float, stamps[0][2:])]


IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def import_times(env: dict) -> tuple[int, dict]:
    """`python -X importtime -c "import spmd.fluid"`: its cumulative microseconds and each
    module's own (self) microseconds."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import spmd.fluid"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    rows = [m.groups() for m in map(IMPORT_LINE.match, out.stderr.splitlines()) if m]
    if out.returncode != 0 or not rows:
        raise RuntimeError(f"import spmd.fluid failed:\n{out.stderr[-2000:]}")
    return int(rows[-1][1]), {name: int(own) for own, _, _, name in rows}


def where_it_goes(env: dict, rounds: int, stamp: list[float]) -> list[str]:
    """The report's second part: what rank 0 loaded and built before its first step
    (counts), and `import spmd.fluid`'s import time (median of `rounds`; the modules that
    cost most by their own time, the least of the rounds: the one noise moves least)."""
    totals, own = [], {}
    for _ in range(rounds):
        total, times = import_times(env)
        totals.append(total)
        for name, us in times.items():
            own[name] = min(own.get(name, us), us)
    top = sorted(own.items(), key=lambda kv: -kv[1])[:8]
    return [
        "## Where it goes (mpiexec -n 2, rank 0, at its first step)",
        "",
        f"- modules imported: {int(stamp[2])} (spmd's {int(stamp[3])}, numpy's "
        f"{int(stamp[4])}); operators built in the two programs: {int(stamp[5])}",
        f"- `python -X importtime -c \"import spmd.fluid\"`: "
        f"{statistics.median(totals) / 1000:.1f} ms cumulative (median of {rounds}); "
        f"{len(own)} modules; most by their own time (least of the rounds): "
        + ", ".join(f"{name} {us / 1000:.1f} ms" for name, us in top),
        "",
        "For the time inside the step: `python -m cProfile -s cumtime` on the step script; "
        "for a count that load does not move: `valgrind --tool=callgrind` on rank 0.",
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bytecode", choices=("warm", "none"), default="warm",
                        help="warm .pyc caches (default) or none: compile from source each run")
    parser.add_argument("--out", default=None, help="also write the Markdown report here")
    args = parser.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        if args.bytecode == "warm":
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        else:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            env.pop("PYTHONPYCACHEPREFIX", None)
        scripts = {"step": os.path.join(tmp, "step.py"), "barrier": os.path.join(tmp, "b.py")}
        pathlib.Path(scripts["step"]).write_text(STEP_SCRIPT)
        pathlib.Path(scripts["barrier"]).write_text(BARRIER_SCRIPT)
        runs = {(kind, mode): cmd for kind, script in scripts.items()
                for mode, cmd in commands(script, os.path.join(tmp, "log")).items()}
        envs = {key: env for key in runs}
        # spmd turns UCX's memory hooks off on one node (spmd/comm/mpi.py), the bare job does
        # not: the same bare job with them off too says how much of the gap that is
        runs[UCX_OFF] = runs["barrier", "mpiexec -n 2"]
        envs[UCX_OFF] = dict(env, UCX_MEM_EVENTS="no")
        for key, cmd in runs.items():  # warm the file cache and .pyc files
            measure(cmd, envs[key])
        first = {key: [] for key in runs}
        total = {key: [] for key in runs}
        modules = {}
        explained = where_it_goes(env, args.rounds,
                                  first_step_line(runs["step", "mpiexec -n 2"], env))
        for _ in range(args.rounds):
            for key, cmd in runs.items():
                t_first, t_total, modules[key] = measure(cmd, envs[key])
                first[key].append(t_first)
                total[key].append(t_total)
    med = {key: statistics.median(v) for key, v in first.items()}
    med_total = {key: statistics.median(v) for key, v in total.items()}
    modes = list(commands("x", "x"))
    rows = [f"| {mode} | {med['step', mode]:.2f} | {med['barrier', mode]:.2f} | "
            f"{med['step', mode] - med['barrier', mode]:.2f} | "
            f"{med['step', mode] / med['barrier', mode]:.2f}x | {med_total['step', mode]:.2f} | "
            f"{modules['step', mode]} ({modules['barrier', mode]}) |"
            for mode in modes]
    launcher_cost = med["step", modes[0]] - med["step", modes[1]]
    ucx_off = med[UCX_OFF]
    report = "\n".join([
        "# bench/startup.py",
        "",
        f"Seconds from the command to rank 0's first finished step (median of {args.rounds} "
        f"rounds, interleaved; {os.cpu_count()} CPUs; bytecode caches: {args.bytecode}). The "
        f"floor: a bare mpi4py barrier job launched the same way.",
        "",
        "| launch | first step (s) | barrier floor (s) | above the floor (s) | "
        "first step / floor | command total (s) | modules of rank 0 (barrier's) |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"paddle-launch costs {launcher_cost:+.2f} s against mpiexec alone for the first step.",
        "",
        f"spmd starts MPI with UCX's memory hooks off on one node (UCX_MEM_EVENTS=no, "
        f"spmd/comm/mpi.py); the bare job keeps them. The bare mpiexec -n 2 job with them off "
        f"too: {ucx_off:.2f} s, and spmd's first step is "
        f"{med['step', modes[1]] / ucx_off:.2f}x that.",
        "",
        *explained,
    ])
    print(report)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
