"""Parameter-server mode against nccl2 (collective) mode on the same model and rank count.

The model is examples/pserver/train.py's CTR net (4 sparse ids per sample in a 10000 x 8
embedding with is_sparse=True, 13 dense features, MLP 45-64-32-1, Adagrad), batch 64 per
trainer, float32, CPU, one BLAS thread per process. Run as a plain script it runs, one after
the other in the same run:
- pserver mode: `paddle-launch --server_num 2 --worker_num 2` of this file (DistributeTranspiler,
  sync mode; 2 pservers + 2 trainers), each trainer timing its steps and counting the bytes
  its pserver clients sent and received (spmd.ps.rpc.client_bytes(): whole gRPC frames, header
  and raw arrays);
- nccl2 mode: `mpiexec -n 2` of this file (CompiledProgram.with_data_parallel: the dense
  gradients all-reduced in fused buckets, the sparse embedding gradient gathered by rows), its
  bytes on the wire the payload a ring collective moves per rank (2 (n-1)/n x the dense
  gradient bytes, plus the other ranks' sparse rows), as MPI does not count them;
and prints a Markdown report: median ms per step of each mode, bytes per step per trainer,
and their ratios (pserver / nccl2).

    python bench/pserver.py [--steps 60] [--warmup 5] [--out bench/out/pserver.md]
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
import time  # noqa: E402

import numpy as np  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "pserver"))
sys.path.insert(0, str(ROOT / "bench"))
from mlp import write_report  # noqa: E402
from train import EMB, SLOTS, ctr_net, reader  # noqa: E402

BATCH, TRAINERS, SERVERS = 64, 2, 2


def build():
    import spmd.fluid as fluid

    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = ctr_net()
        fluid.optimizer.Adagrad(learning_rate=0.05).minimize(loss)
    return main, startup, loss


def step_times(run, feeds, warmup: int, steps: int) -> list[float]:
    for _ in range(warmup):
        run(next(feeds))
    out = []
    for _ in range(steps):
        feed = next(feeds)
        t0 = time.perf_counter()
        run(feed)
        out.append(time.perf_counter() - t0)
    return out


def grad_bytes(main) -> tuple[int, str]:
    """Bytes of the dense gradients, and the embedding's name."""
    dense, table = 0, None
    for p in main.global_block().all_parameters():
        if len(p.shape) == 2 and p.shape[0] >= 1000:
            table = p.name
        else:
            dense += int(np.prod(p.shape)) * 4
    return dense, table


def worker_pserver(args) -> int:
    """One role of the pserver job (under paddle-launch)."""
    import spmd.fluid as fluid
    from spmd.ps.rpc import client_bytes

    role = os.environ["PADDLE_TRAINING_ROLE"]
    endpoints = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"]
    trainers = int(os.environ["PADDLE_TRAINERS_NUM"])
    trainer_id = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
    main, startup, loss = build()
    exe = fluid.Executor(fluid.CPUPlace())
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id, program=main, pservers=endpoints, trainers=trainers,
                sync_mode=True, startup_program=startup)
    if role == "PSERVER":
        ep = os.environ["PADDLE_CURRENT_ENDPOINT"]
        ps_prog = t.get_pserver_program(ep)
        exe.run(t.get_startup_program(ep, ps_prog))
        exe.run(ps_prog)
        return 0
    prog = t.get_trainer_program()
    exe.run(startup)
    feeds = reader(BATCH, trainer_id, trainers)
    before = {}

    def run(feed):
        exe.run(prog, feed=feed, fetch_list=[loss])

    for _ in range(args.warmup):
        run(next(feeds))
    before = client_bytes()
    times = step_times(run, feeds, 0, args.steps)
    after = client_bytes()
    exe.close()
    result = {"trainer": trainer_id, "ms": statistics.median(times) * 1e3,
              "sent": (after["sent"] - before["sent"]) / args.steps,
              "received": (after["received"] - before["received"]) / args.steps}
    with open(os.path.join(args.result_dir, f"ps.{trainer_id}.json"), "w") as f:
        json.dump(result, f)
    return 0


def worker_nccl2(args) -> int:
    """One rank of the collective job (under mpiexec)."""
    from mpi4py import MPI

    import spmd.fluid as fluid

    comm = MPI.COMM_WORLD
    main, startup, loss = build()
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    feeds = reader(BATCH, comm.rank, comm.size)
    dense, table = grad_bytes(main)
    rows = []

    def run(feed):
        comm.Barrier()
        exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)
        rows.append(len(np.unique(feed["ids"])))

    times = step_times(run, feeds, args.warmup, args.steps)
    times = comm.gather(statistics.median(times) * 1e3, root=0)
    mean_rows = comm.allreduce(float(np.mean(rows[args.warmup:])), op=MPI.SUM) / comm.size
    n = comm.size
    # the payload of a ring all-reduce per rank, plus the other ranks' sparse rows (int64
    # row ids and float32 rows) gathered by every rank
    sparse = mean_rows * (8 + EMB * 4)
    sent = 2 * (n - 1) / n * dense + sparse
    received = 2 * (n - 1) / n * dense + (n - 1) * sparse
    if comm.rank == 0:
        print(json.dumps({"ms": times, "sent": sent, "received": received, "dense": dense,
                          "table": table, "rows": mean_rows}), flush=True)
    return 0


def launch(cmd, env=None) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env=dict(os.environ, **(env or {})))
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out.stdout


def report(ps: list[dict], nc: dict, args) -> str:
    ps_ms = statistics.mean(r["ms"] for r in ps)
    nc_ms = statistics.mean(nc["ms"])
    ps_sent = statistics.mean(r["sent"] for r in ps)
    ps_recv = statistics.mean(r["received"] for r in ps)
    ps_bytes, nc_bytes = ps_sent + ps_recv, nc["sent"] + nc["received"]
    kb = 1e3
    return "\n".join([
        "# bench/pserver.py", "",
        f"CTR net of examples/pserver (embedding 10000 x {EMB} is_sparse, {SLOTS} ids per "
        f"sample, MLP, Adagrad), batch {BATCH} per trainer, float32, CPU, 1 BLAS thread per "
        f"process; {TRAINERS} trainers; median of {args.steps} steps after {args.warmup} "
        f"warm-up steps, averaged over the trainers.", "",
        "| mode | processes | ms/step | KB sent/step | KB received/step | KB on the wire/step |",
        "|---|---|---|---|---|---|",
        f"| pserver (DistributeTranspiler, sync, gRPC) | {SERVERS} pservers + {TRAINERS} "
        f"trainers | {ps_ms:.3f} | {ps_sent / kb:.1f} | {ps_recv / kb:.1f} | "
        f"{ps_bytes / kb:.1f} |",
        f"| nccl2 (with_data_parallel, MPI) | {TRAINERS} ranks | {nc_ms:.3f} | "
        f"{nc['sent'] / kb:.1f} | {nc['received'] / kb:.1f} | {nc_bytes / kb:.1f} |",
        f"| **ratio pserver / nccl2** | | **{ps_ms / nc_ms:.2f}** | "
        f"{ps_sent / nc['sent']:.2f} | {ps_recv / nc['received']:.2f} | "
        f"**{ps_bytes / nc_bytes:.2f}** |", "",
        "Per trainer: " + "; ".join(f"trainer {r['trainer']} {r['ms']:.3f} ms, "
                                    f"{r['sent'] / kb:.1f} KB sent, "
                                    f"{r['received'] / kb:.1f} KB received"
                                    for r in sorted(ps, key=lambda r: r["trainer"])) +
        "; nccl2 ranks: " + ", ".join(f"{m:.3f} ms" for m in nc["ms"]) + ".", "",
        f"pserver bytes are measured (spmd.ps.rpc.client_bytes(): every gRPC frame the "
        f"trainer's clients sent and received: the dense gradients and the embedding "
        f"gradient's rows, the barriers, the dense parameters received, and the embedding "
        f"rows the trainer prefetches from the pservers, as the transpiler turns the "
        f"is_sparse lookup into distributed_lookup_table as fluid 1.8 did). nccl2 bytes are "
        f"the collective's payload per rank: "
        f"{nc['dense'] / kb:.1f} KB of dense gradients in a ring all-reduce "
        f"(2 (n-1)/n of them each way) plus {nc['rows']:.0f} touched embedding rows per "
        f"rank gathered by rows.",
    ])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out")
    p.add_argument("--worker", choices=["pserver", "nccl2"])
    p.add_argument("--result_dir")
    args = p.parse_args(argv)
    if args.worker == "pserver":
        return worker_pserver(args)
    if args.worker == "nccl2":
        return worker_nccl2(args)

    bindir = pathlib.Path(sys.executable).parent
    common = ["--steps", str(args.steps), "--warmup", str(args.warmup)]
    with tempfile.TemporaryDirectory() as tmp:
        launch([sys.executable, "-m", "launch", "--server_num", str(SERVERS), "--worker_num",
                str(TRAINERS), "--log_dir", os.path.join(tmp, "log"), __file__,
                "--worker", "pserver", "--result_dir", tmp, *common],
               {"SPMD_PS_RPC_DEADLINE": "60"})
        ps = [json.loads(pathlib.Path(tmp, f"ps.{i}.json").read_text())
              for i in range(TRAINERS)]
    out = launch([str(bindir / "mpiexec"), "-n", str(TRAINERS), sys.executable, __file__,
                  "--worker", "nccl2", *common])
    nc = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    write_report(report(ps, nc, args), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
