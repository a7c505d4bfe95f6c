"""GPU training steps: spmd on fluid.CUDAPlace (cupy) against PyTorch CUDA eager, one process
and data parallel (NCCL, one rank per GPU) against PyTorch DDP.

Models, float32, SGD (lr 0.01), softmax cross-entropy: the MLP 784-512-512-10 of bench/mlp.py
and the small CNN and ResNet-20 of bench/cnn.py (their builders and their PyTorch twins,
imported). PyTorch starts from spmd's initial parameters (copied out of its startup program)
on the same data, already on the device; the first losses are checked to agree. TF32 is off
in PyTorch (cupy does not use it either), so both compute in float32. Every step fetches the
loss to the host (spmd's fetch_list, PyTorch's .item()), as a training loop that logs it does,
so each step ends in a device sync on both sides. Each timed batch of steps is bracketed by
device synchronizations, after warm-up steps; frameworks run in interleaved rounds, the
figures are medians, the ratios spmd/PyTorch the numbers to quote.

Data parallel: `CompiledProgram(main).with_data_parallel(loss_name=...)` on each rank's GPU
under `mpiexec -n <ranks>` (NCCL between ranks; spmd's collectives run on a stream of their own,
overlapping the backward pass), against PyTorch DDP (nccl backend, rank and size from the MPI
launcher's variables) and against the plain one-process step; also one allreduce of the
model's gradient bytes through spmd's NCCL communicator (made directly, so that even one rank
runs NCCL: spmd's data-parallel world of one rank is a plain communicator that sends nothing)
and through torch.distributed.

    python bench/gpu.py [--quick] [--models mlp,small,resnet] [--dp-ranks N] [--out FILE]
    python bench/gpu.py --place cpu --quick      # the same code on numpy / torch CPU / MPI, gloo

Without cupy or a CUDA device (and without --place cpu) it prints why it skips and exits 0.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import spmd.fluid as fluid  # noqa: E402  (first: under mpiexec, import spmd may fork)

# per model: the CPU benches' batch and a larger one, where a GPU is worth it
BATCHES = {"mlp": (128, 512), "small": (64, 256), "resnet": (32, 256)}
TITLES = {"mlp": "MLP 784-512-512-10", "small": "small CNN", "resnet": "ResNet-20"}


def gpu_unavailable() -> str | None:
    """Why no GPU run is possible here, or None."""
    from spmd.core.places import cuda_unavailable_reason

    return cuda_unavailable_reason()


class Device:
    """Where the steps run: "gpu" (cupy arrays, CUDA torch) or "cpu" (numpy, torch CPU)."""

    def __init__(self, kind: str, gpu: int = 0):
        self.kind, self.gpu = kind, gpu
        self.torch = _torch(kind)
        if kind == "gpu":
            import cupy

            cupy.cuda.Device(gpu).use()
            self.xp, self.place = cupy, fluid.CUDAPlace(gpu)
            self.torch_device = f"cuda:{gpu}"
        else:
            self.xp, self.place, self.torch_device = np, fluid.CPUPlace(), "cpu"

    def sync(self) -> None:
        """Wait for everything queued on the device (by either framework)."""
        if self.kind != "gpu":
            return
        self.xp.cuda.Device(self.gpu).synchronize()
        if self.torch is not None:
            self.torch.cuda.synchronize(self.gpu)

    def describe(self) -> str:
        torch = self.torch
        tv = f"torch {torch.__version__}" if torch is not None else "PyTorch absent: no column"
        if self.kind != "gpu":
            return f"CPU, numpy {np.__version__}, {tv}, 1 BLAS thread"
        props = self.xp.cuda.runtime.getDeviceProperties(self.gpu)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        cuda = self.xp.cuda.runtime.runtimeGetVersion()
        return (f"{name}, cupy {self.xp.__version__} (CUDA runtime {cuda // 1000}."
                f"{cuda % 1000 // 10}), {tv}")

    def free(self) -> None:
        if self.kind == "gpu":
            self.xp.get_default_memory_pool().free_all_blocks()
            if self.torch is not None:
                self.torch.cuda.empty_cache()


def _torch(kind: str):
    """torch where it can run on `kind`, else None (its columns are skipped)."""
    try:
        import torch
    except ImportError:
        return None
    if kind == "gpu":
        if not torch.cuda.is_available():
            return None
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 on both sides
        torch.backends.cudnn.allow_tf32 = False
    return torch


def torch_mlp(p):
    """The MLP of bench/mlp.py as a PyTorch function of spmd's parameters fc_0..fc_2."""
    import torch.nn.functional as F
    from mlp import SIZES

    layers = [p.take("fc") for _ in SIZES[1:]]

    def forward(x):
        for w, b in layers[:-1]:
            x = F.relu(x @ w + b)
        w, b = layers[-1]
        return x @ w + b
    return forward


def build_model(model: str):
    """(main, startup, loss, input shape, torch builder) of `model`."""
    import cnn
    import mlp

    if model == "mlp":
        main, startup, loss = mlp.build()
        return main, startup, loss, (mlp.SIZES[0],), torch_mlp
    _, cfg, body, torch_body = cnn.MODELS[model]
    return (*cnn.build_program(body, cfg["shape"]), cfg["shape"], torch_body)


def steppers(dev: Device, model: str, batch: int, seed: int = 0, data_parallel=False,
             ddp=False) -> dict:
    """{name: step() -> loss} for spmd and PyTorch on the same data from the same initial
    parameters; with `data_parallel` spmd's program is compiled with_data_parallel and
    PyTorch's model is wrapped in DDP where `ddp` says its process group exists (else PyTorch
    is left out)."""
    import cnn

    main, startup, loss, shape, torch_body = build_model(model)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, *shape)).astype("float32")
    y = rng.integers(0, 10, size=(batch, 1)).astype("int64")
    scope, exe = fluid.Scope(), fluid.Executor(dev.place)
    exe.run(startup, scope=scope)
    feed = {"x": dev.xp.asarray(x), "y": dev.xp.asarray(y)}  # on the device, as torch's
    prog = main
    if data_parallel:
        prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    fns = {"spmd": lambda: float(exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)[0])}
    torch = dev.torch
    if torch is not None and (ddp or not data_parallel):
        p = cnn.TorchParams(scope, main, device=dev.torch_device)
        forward = torch_body(p)
        if data_parallel:
            forward = torch.nn.parallel.DistributedDataParallel(
                _module(torch, forward, p.tensors),
                device_ids=[dev.gpu] if dev.kind == "gpu" else None)
        fns["torch"] = cnn.torch_stepper(forward, p.tensors, x, y, device=dev.torch_device)
    return fns


def _module(torch, forward, params):
    """An nn.Module over a functional forward and its nn.Parameters (what DDP wraps)."""

    class Functional(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.params = torch.nn.ParameterList(params)

        def forward(self, x):
            return forward(x)
    return Functional()


def first_losses_agree(fns: dict) -> str | None:
    """Runs each step once; a message when the losses differ (same start, same data)."""
    first = {name: fn() for name, fn in fns.items()}
    ref = first["spmd"]
    bad = {k: v for k, v in first.items()  # written so that a NaN is bad too
           if not abs(v - ref) <= 1e-3 * max(1.0, abs(ref))}
    return f"first losses differ: {first}" if bad else None


def interleaved(dev: Device, fns: dict, rounds: int, steps: int, barrier=None) -> dict:
    """{name: median s/step}: each round times `steps` steps of every fn in turn, the device
    synchronized before and after (and all ranks at a barrier first)."""
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            dev.sync()
            if barrier is not None:
                barrier()
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            dev.sync()
            times[name].append((time.perf_counter() - t0) / steps)
    return {name: statistics.median(t) for name, t in times.items()}


def _ms(t: dict, key: str) -> str:
    return f"{t[key] * 1e3:.2f}" if key in t else "-"


def _ratio(t: dict, a: str, b: str) -> str:
    return f"**{t[a] / t[b]:.2f}**" if a in t and b in t else "-"


# ---- one process ------------------------------------------------------------------------------

def single(dev: Device, args, problems: list) -> list[str]:
    rows = ["| model | batch | spmd ms/step | PyTorch ms/step | spmd/PyTorch |",
            "|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    for model in args.models:
        for batch in args.batches or BATCHES[model]:
            try:
                t = _single_row(dev, model, batch, args, problems)
            except Exception as e:  # noqa: BLE001 - one failed row must not lose the others
                import traceback

                traceback.print_exc()
                problems.append(f"{TITLES[model]}, batch {batch}: {type(e).__name__}: {e}")
                t = {}
            rows.append(f"| {TITLES[model]} | {batch} | {_ms(t, 'spmd')} | {_ms(t, 'torch')} | "
                        f"{_ratio(t, 'spmd', 'torch')} |")
            print(rows[-1], flush=True)
            dev.free()
    return rows


def _single_row(dev: Device, model: str, batch: int, args, problems: list) -> dict:
    fns = steppers(dev, model, batch)
    problem = first_losses_agree(fns)
    if problem:
        problems.append(f"{TITLES[model]}, batch {batch}: {problem}")
    for _ in range(args.warmup):
        for fn in fns.values():
            fn()
    return interleaved(dev, fns, args.rounds, args.steps)


# ---- data parallel: run under mpiexec ----------------------------------------------------------

def _launcher_rank_size() -> tuple[int, int]:
    """Rank and size from the MPI launcher's variables (MPICH/Hydra, Open MPI, Slurm)."""
    for rank, size in (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                       ("PMIX_RANK", "PMIX_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    from spmd.comm import detect

    t = detect()
    return t.rank, t.size


def _torch_group(dev: Device) -> bool:
    """Joins PyTorch's process group (nccl on GPU, gloo on CPU); False where unavailable."""
    torch = dev.torch
    if torch is None or not torch.distributed.is_available():
        return False
    import datetime

    backend = "nccl" if dev.kind == "gpu" else "gloo"
    rank, size = _launcher_rank_size()
    kwargs = {"device_id": torch.device(dev.torch_device)} if dev.kind == "gpu" else {}
    torch.distributed.init_process_group(backend, init_method="env://", rank=rank,
                                         world_size=size, timeout=datetime.timedelta(seconds=120),
                                         **kwargs)
    return True


def allreduce_times(dev: Device, nbytes: int, rounds: int, steps: int, barrier, ddp: bool):
    """{name: median s} of one allreduce of `nbytes` float32 bytes: spmd's communicator made
    directly (NCCL on GPU, its collective on its own stream; MPI on CPU) and torch.distributed."""
    from spmd.comm.factory import create_communicator
    from spmd.comm.mpi import MPICommunicator

    n = nbytes // 4
    if dev.kind == "gpu":
        comm = create_communicator("nccl", device_id=dev.gpu, mpi_comm=MPICommunicator())
    else:
        comm = create_communicator("mpi")
    buf = dev.xp.ones(n, dtype="float32")

    def spmd_allreduce():  # as torch's: the compute stream waits for it, the host does not
        comm.iallreduce(buf).wait()
    fns = {"spmd": spmd_allreduce}
    if ddp:
        torch = dev.torch
        tbuf = torch.ones(n, dtype=torch.float32, device=dev.torch_device)
        fns["torch"] = lambda: torch.distributed.all_reduce(tbuf)
    for fn in fns.values():
        fn()
    t = interleaved(dev, fns, rounds, steps, barrier)
    comm.wait_all()
    comm.close()
    return t


def dp_worker(args) -> dict:
    """Runs on every rank; returns the figures of this rank (rank 0's are reported)."""
    from mpi4py import MPI

    from spmd.comm import detect, select_gpu

    comm = MPI.COMM_WORLD
    gpu = 0
    if args.place == "gpu":
        import cupy

        gpu = select_gpu(detect(), cupy.cuda.runtime.getDeviceCount())
    dev = Device(args.place, gpu)
    ddp = _torch_group(dev)
    rows, problems = [], []
    for model in args.dp_models:
        batch = args.dp_batch or BATCHES[model][-1]
        plain = steppers(dev, model, batch, seed=comm.rank)
        dp = steppers(dev, model, batch, seed=comm.rank, data_parallel=True, ddp=ddp)
        for fns in (plain, dp):
            problem = first_losses_agree(fns)
            if problem:
                problems.append(f"{TITLES[model]} rank {comm.rank}: {problem}")
        fns = {"spmd": plain["spmd"], "spmd_dp": dp["spmd"]}
        fns.update({k: v for k, v in (("torch", plain.get("torch")),
                                      ("torch_dp", dp.get("torch"))) if v is not None})
        for _ in range(args.warmup):
            for fn in fns.values():
                fn()
        t = interleaved(dev, fns, args.rounds, args.steps, comm.Barrier)
        nparams = sum(int(np.prod(p.shape)) for p in
                      build_model(model)[0].global_block().all_parameters())
        try:
            coll = allreduce_times(dev, 4 * nparams, args.rounds, args.steps, comm.Barrier, ddp)
        except Exception as e:  # noqa: BLE001 - reported; the step rows above still stand
            import traceback

            traceback.print_exc()
            problems.append(f"allreduce of {TITLES[model]}'s gradients, rank {comm.rank}: "
                            f"{type(e).__name__}: {e}")
            coll = {}
        rows.append({"model": model, "batch": batch, "t": t, "grad_bytes": 4 * nparams,
                     "allreduce": coll})
        del plain, dp, fns
        dev.free()
    all_problems = comm.gather(problems, root=0)  # a few strings, once
    if ddp:
        dev.torch.distributed.destroy_process_group()
    return {"ranks": comm.size, "device": dev.describe(), "rows": rows,
            "problems": [p for ps in (all_problems or []) for p in ps]}


def _mpiexec() -> str | None:
    local = pathlib.Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else shutil.which("mpiexec")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def data_parallel(args, problems: list) -> list[str]:
    """Launches the ranks under mpiexec; their report, or why there is none."""
    mpiexec = _mpiexec()
    if mpiexec is None:
        return ["Data parallel: skipped, no mpiexec found (pip install mpich)."]
    cmd = [mpiexec, "-n", str(args.dp_ranks), sys.executable, __file__, "--worker",
           "--place", args.place, "--rounds", str(args.rounds), "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--dp-models", ",".join(args.dp_models)]
    if args.dp_batch:
        cmd += ["--dp-batch", str(args.dp_batch)]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
               PYTHONUNBUFFERED="1", SPMD_COLLECTIVE_TIMEOUT="120")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.dp_timeout,
                             env=env)
    except subprocess.TimeoutExpired as e:
        tail = (e.stdout or b"")[-3000:]
        problems.append(f"data parallel: {' '.join(cmd)} still running after "
                        f"{args.dp_timeout} s; output so far: {tail!r}")
        return ["Data parallel: timed out (see the problems below)."]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        problems.append(f"data parallel: {' '.join(cmd)} exited {out.returncode}:\n"
                        f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return ["Data parallel: failed (see the problems below)."]
    result = json.loads(lines[-1])
    problems.extend(result["problems"])
    return dp_report(result, args)


def dp_report(r: dict, args) -> list[str]:
    gpu = args.place == "gpu"
    comm, tcomm = ("NCCL", "DDP, nccl") if gpu else ("MPI", "DDP, gloo")
    rows = [f"## Data parallel, {r['ranks']} rank(s)" + (", one per GPU" if gpu else ""), "",
            f"Each rank: {r['device']}; every rank is fed its own batch of the size given.",
            "", f"| model | batch/rank | spmd ms | spmd DP ({comm}) ms | PyTorch ms | PyTorch "
            f"({tcomm}) ms | spmd DP/DDP | spmd DP/plain | DDP/plain |",
            "|---|---|---|---|---|---|---|---|---|"]
    how = "on a CUDA stream of its own" if gpu else "on its progress thread"
    coll = ["", f"One allreduce of the model's float32 gradient bytes: spmd's {comm} "
            f"communicator made directly (iallreduce, {how}) against "
            f"torch.distributed.all_reduce:", "",
            "| model | MB | spmd ms | torch.distributed ms | spmd/torch |", "|---|---|---|---|---|"]
    for row in r["rows"]:
        t, a = row["t"], row["allreduce"]
        rows.append(f"| {TITLES[row['model']]} | {row['batch']} | {_ms(t, 'spmd')} | "
                    f"{_ms(t, 'spmd_dp')} | {_ms(t, 'torch')} | {_ms(t, 'torch_dp')} | "
                    f"{_ratio(t, 'spmd_dp', 'torch_dp')} | {_ratio(t, 'spmd_dp', 'spmd')} | "
                    f"{_ratio(t, 'torch_dp', 'torch')} |")
        coll.append(f"| {TITLES[row['model']]} | {row['grad_bytes'] / 1e6:.2f} | "
                    f"{_ms(a, 'spmd')} | {_ms(a, 'torch')} | {_ratio(a, 'spmd', 'torch')} |")
    note = ["", "At 1 rank spmd's data-parallel world is a communicator of one that sends "
            "nothing, while DDP still runs its allreduce through the process group; the "
            f"allreduce table is where {comm}'s cost shows at 1 rank."] if r["ranks"] == 1 else []
    return rows + coll + note


# ---- main ---------------------------------------------------------------------------------------

def _save(lines: list[str], out: str | None) -> None:
    if out:
        pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(out).write_text("\n".join(lines) + "\n")


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--place", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--quick", action="store_true",
                        help="3 rounds x 5 steps after 2 warm-up steps (unless given)")
    parser.add_argument("--rounds", type=int, default=None, help="default 7")
    parser.add_argument("--steps", type=int, default=None,
                        help="steps per timed batch (default 10)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed steps before the rounds (default 5)")
    parser.add_argument("--models", default="mlp,small,resnet")
    parser.add_argument("--batches", default=None,
                        help="comma-separated batch sizes for every model (default: the CPU "
                        "benches' and a larger one: " +
                        ", ".join(f"{m} {a}/{b}" for m, (a, b) in BATCHES.items()) + ")")
    parser.add_argument("--dp-ranks", type=int, default=None,
                        help="ranks of the data-parallel run (default: the GPUs, 1 on CPU); 0: "
                        "none")
    parser.add_argument("--dp-models", default="mlp,resnet")
    parser.add_argument("--dp-batch", type=int, default=None,
                        help="batch per rank (default: each model's larger batch)")
    parser.add_argument("--dp-timeout", type=float, default=300.0)
    parser.add_argument("--out", default=None, help="also write the Markdown report here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name, full, quick in (("rounds", 7, 3), ("steps", 10, 5), ("warmup", 5, 2)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    args.models = [m for m in args.models.split(",") if m]
    args.dp_models = [m for m in args.dp_models.split(",") if m]
    for m in args.models + args.dp_models:
        if m not in BATCHES:
            parser.error(f"unknown model {m!r}; choose from {sorted(BATCHES)}")
    args.batches = [int(b) for b in args.batches.split(",")] if args.batches else None
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.place == "gpu":
        reason = gpu_unavailable()
        if reason:
            print(f"bench/gpu.py: skipped: {reason}; `--place cpu` runs the same code on the CPU")
            return 0
    if args.worker:
        result = dp_worker(args)
        from mpi4py import MPI

        if MPI.COMM_WORLD.rank == 0:
            print(json.dumps(result), flush=True)
        return 0
    if args.dp_ranks is None:
        args.dp_ranks = 1
        if args.place == "gpu":
            import cupy

            args.dp_ranks = cupy.cuda.runtime.getDeviceCount()
    dev = Device(args.place)
    head = [f"# bench/gpu.py: spmd on {'CUDAPlace' if args.place == 'gpu' else 'CPUPlace'} "
            f"vs PyTorch eager", "", f"Device: {dev.describe()}. float32, SGD, the loss fetched "
            f"every step; median of {args.rounds} rounds x {args.steps} steps after "
            f"{args.warmup} warm-up steps, interleaved.", ""]
    print("\n".join(head), flush=True)
    problems: list[str] = []
    lines = head + single(dev, args, problems)
    dev.free()
    _save(lines + [f"- {p}" for p in problems], args.out)  # kept if the rest is cut short
    if args.dp_ranks > 0 and args.dp_models:
        lines += [""] + data_parallel(args, problems)
    if problems:
        lines += ["", "## Problems", ""] + [f"- {p}" for p in problems]
    from mlp import write_report

    print()
    write_report("\n".join(lines), args.out)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
