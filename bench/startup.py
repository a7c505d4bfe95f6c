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

    python bench/startup.py [--rounds 5] [--bytecode warm|none] [--out bench/out/startup.md]
"""
from __future__ import annotations

import argparse
import os
import pathlib
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
    print("FIRST_STEP", time.time(), len(sys.modules), flush=True)
'''

BARRIER_SCRIPT = '''\
import time
from mpi4py import MPI
MPI.COMM_WORLD.Barrier()
if MPI.COMM_WORLD.Get_rank() == 0:
    import sys
    print("FIRST_STEP", time.time(), len(sys.modules), flush=True)
'''


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
    start = time.time()
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    end = time.time()
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    stamps = [line.split() for line in out.stdout.splitlines()
              if line.startswith("FIRST_STEP")]
    if not stamps:
        raise RuntimeError(f"{' '.join(cmd)} printed no FIRST_STEP:\n{out.stdout[-2000:]}")
    return float(stamps[0][1]) - start, end - start, int(stamps[0][2])


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
        for cmd in runs.values():  # warm the file cache and .pyc files
            measure(cmd, env)
        first = {key: [] for key in runs}
        total = {key: [] for key in runs}
        modules = {}
        for _ in range(args.rounds):
            for key, cmd in runs.items():
                t_first, t_total, modules[key] = measure(cmd, env)
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
    ])
    print(report)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
