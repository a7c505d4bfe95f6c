"""Data-parallel step cost against hand-written numpy plus one fused mpi4py Allreduce.

MLP 784-512-512-10, batch 128 per rank, float32, SGD, one BLAS thread per rank. Run as a plain
script it launches itself under `mpiexec -n 1` and `-n 2` and prints a Markdown report:
- step time of spmd (CompiledProgram.with_data_parallel, fused all-reduce) and of the reference
  (the same step by hand in numpy, gradients packed into one buffer, one raw
  comm.Allreduce), interleaved in rounds in the same run; the ratio is the figure to quote;
- bandwidth of spmd's fused gradient allreduce (as the program runs it: the persistent bucket,
  weight gradients already in it, bias gradients copied in; with every rank on one node the
  bucket is summed in node-shared memory, spmd/executor/shared_bucket.py) against a raw
  Allreduce of the same bytes;
- optimizer-state bytes per rank with Adam in Reduce mode against AllReduce mode;
- the step in Reduce mode (fused: one reduce-scatter, one all-gather; on one node the
  all-gather's parameters are a node-shared block the owners update in place), same rounds,
  and its ratio to AllReduce mode's (the target: <= 1.0).

    python bench/data_parallel.py [--rounds 15] [--steps 10] [--out bench/out/data_parallel.md]
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
import types  # noqa: E402

import numpy as np  # noqa: E402
from mlp import BATCH, SIZES, build, numpy_grads, params_of, sgd, timed, write_report  # noqa: E402


def compiled(main, loss, reduce=False, fuse=True):
    """fuse=False in Reduce mode: one reduce per gradient, broadcasts fused per owner."""
    import spmd.fluid as fluid

    strategy = fluid.BuildStrategy()
    strategy.fuse_all_reduce_ops = fuse
    strategy.fuse_broadcast_ops = True
    if reduce:
        strategy.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    return fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                          build_strategy=strategy)


def reference_step(params, x, y, comm, MPI):
    """The step by hand: forward, backward, grads packed into one buffer, one Allreduce, SGD."""
    _, grads = numpy_grads(params, x, y, len(y) * comm.size)
    flat = np.concatenate([g.ravel() for g in grads])
    comm.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM)
    sizes = np.cumsum([0] + [g.size for g in grads])
    sgd(params, [flat[a:b].reshape(g.shape) for a, b, g in zip(sizes, sizes[1:], grads)])


def interleaved(comm, fns, rounds: int, steps: int) -> list[float]:
    """Median ms per call of each fn, timed in turn within every round (all ranks together),
    so a change in the machine's load hits them alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, out in zip(fns, times):
            comm.Barrier()
            out.append(timed(fn, steps))
    return [statistics.median(t) * 1e3 for t in times]


def mlp_on_rank(comm, opt: str = "sgd", reduce: bool = False, fuse: bool = True):
    """The bench MLP compiled data-parallel on this rank's batch (drawn with the rank as seed),
    run once (compiled, rank 0's parameters broadcast): a namespace with `step()` (one more
    step), `exe`, `scope`, `feed`, `x`, `y`, `loss` and `prog`."""
    import spmd.fluid as fluid

    rng = np.random.default_rng(comm.rank)
    x = rng.standard_normal((BATCH, SIZES[0])).astype("float32")
    y = rng.integers(0, SIZES[-1], size=(BATCH, 1)).astype("int64")
    main, startup, loss = build(opt)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    prog = compiled(main, loss, reduce=reduce, fuse=fuse)
    feed = {"x": x, "y": y}

    def step():
        return exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)
    step()
    return types.SimpleNamespace(step=step, exe=exe, scope=scope, feed=feed, x=x, y=y,
                                 loss=loss, prog=prog)


def measure_rank(rounds, steps):
    """Runs on every rank under mpiexec; returns rank 0's figures."""
    from mpi4py import MPI

    import spmd.fluid as fluid
    from spmd.comm.mpi import MPICommunicator
    from spmd.executor.buckets import Bucket
    from spmd.kernels.context import KernelContext
    from spmd.kernels.registry import get_kernel

    c_allreduce_sum = get_kernel("c_allreduce_sum")

    comm = MPI.COMM_WORLD
    dp = mlp_on_rank(comm)
    exe, scope, feed, x, y = dp.exe, dp.scope, dp.feed, dp.x, dp.y
    params = params_of(scope)
    names = [(f"fc_{i}.w_0", f"fc_{i}.b_0") for i in range(3)]
    spmd_run = dp.step
    # the same step in Reduce mode (fused: one reduce-scatter, one all-gather) and per gradient
    reduce_run = mlp_on_rank(comm, reduce=True).step
    pieces_run = mlp_on_rank(comm, reduce=True, fuse=False).step

    def ref_run():
        reference_step(params, x, y, comm, MPI)

    for _ in range(3):
        spmd_run(), reduce_run(), pieces_run(), ref_run()
    from step import python_calls  # (bench/step.py: cProfile's count, deterministic)

    comm.Barrier()
    calls = {"allreduce": python_calls(spmd_run), "reduce": python_calls(reduce_run)}
    spmd_ms, reduce_ms, pieces_ms, ref_ms = interleaved(
        comm, [spmd_run, reduce_run, pieces_run, ref_run], rounds, steps)

    # fused gradient allreduce vs a raw Allreduce of the same bytes
    grads = [np.array(scope.find_var(n).get_tensor()) for pair in names for n in pair]
    nbytes = sum(g.nbytes for g in grads)
    ctx = KernelContext(comm=MPICommunicator())
    raw = np.concatenate([g.ravel() for g in grads])
    # as the compiled program runs it: one persistent bucket (in node-shared memory where
    # every rank is on this node); mul_grad wrote each weight gradient into its slot, the bias
    # gradients are copied in; nothing after it to overlap, so it runs inline
    bucket = Bucket([g.shape for g in grads], "float32")
    ctx.bucket = bucket
    attrs = {"use_calc_stream": True}

    def fused():
        c_allreduce_sum(np, {"X": inputs}, attrs, frozenset({"Out"}), ctx)
        ctx.comm.wait_all()

    inputs = grads
    fused()  # (the first all-reduce decides where the bucket lives: its views are final now)
    _, views = bucket.get(np)
    inputs = [views[i] if g.ndim == 2 else g for i, g in enumerate(grads)]

    def raw_allreduce():
        comm.Allreduce(MPI.IN_PLACE, raw, op=MPI.SUM)

    fused_ms, raw_ms = interleaved(comm, [fused, raw_allreduce], rounds, steps)
    ctx.comm.close()

    # optimizer-state bytes per rank: Adam, Reduce vs AllReduce
    state_bytes = {}
    for mode in ("AllReduce", "Reduce"):
        main, startup, loss = build("adam")
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        prog = compiled(main, loss, reduce=mode == "Reduce")
        exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)
        state = prog.data_parallel_program.optimizer_state  # Reduce mode: chunk state included
        held = [s for names_ in state.values() for s in names_ if scope.find_var(s) is not None]
        state_bytes[mode] = int(sum(np.array(scope.find_var(s).get_tensor()).nbytes
                                    for s in held))
    per_rank_reduce = comm.gather(state_bytes["Reduce"], root=0)  # a few ints, setup only
    return {"ranks": comm.size, "spmd_ms": spmd_ms, "reduce_ms": reduce_ms,
            "pieces_ms": pieces_ms, "ref_ms": ref_ms, "grad_bytes": nbytes,
            "fused_ms": fused_ms, "raw_ms": raw_ms,
            "state_allreduce": state_bytes["AllReduce"], "state_reduce": per_rank_reduce,
            "calls": calls}


def launch(nprocs, args):
    mpiexec = pathlib.Path(sys.executable).parent / "mpiexec"
    cmd = [str(mpiexec), "-n", str(nprocs), sys.executable, __file__, "--worker",
           "--rounds", str(args.rounds), "--steps", str(args.steps)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1]
    return json.loads(line)


def report(results, args) -> str:
    rows = ["| ranks | spmd ms/step | numpy + 1 Allreduce ms/step | ratio | fused allreduce "
            "ms | raw Allreduce ms | bandwidth ratio |", "|---|---|---|---|---|---|---|"]
    reduce_rows = ["| ranks | AllReduce mode ms/step | Reduce mode, fused ms/step | ratio | "
                   "Reduce mode, per gradient ms/step | ratio |", "|---|---|---|---|---|---|"]
    for r in results:
        bw = r["raw_ms"] / r["fused_ms"] if r["ranks"] > 1 else float("nan")
        rows.append(f"| {r['ranks']} | {r['spmd_ms']:.3f} | {r['ref_ms']:.3f} | "
                    f"**{r['spmd_ms'] / r['ref_ms']:.3f}** | {r['fused_ms']:.3f} | "
                    f"{r['raw_ms']:.3f} | **{bw:.2f}** |")
        reduce_rows.append(f"| {r['ranks']} | {r['spmd_ms']:.3f} | {r['reduce_ms']:.3f} | "
                           f"**{r['reduce_ms'] / r['spmd_ms']:.3f}** | {r['pieces_ms']:.3f} | "
                           f"{r['pieces_ms'] / r['spmd_ms']:.3f} |")
    two = results[-1]
    state = ", ".join(f"rank {i}: {b / 1e6:.2f} MB" for i, b in enumerate(two["state_reduce"]))
    return "\n".join([
        "# bench/data_parallel.py", "",
        f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH} per rank, float32, SGD, fused "
        f"all-reduce ({two['grad_bytes'] / 1e6:.2f} MB of gradients), 1 BLAS thread per rank; "
        f"median of {args.rounds} rounds x {args.steps} steps, interleaved.", "",
        *rows, "",
        "Targets (issue 24 item 6): 2-rank ratio <= 0.95; bandwidth ratio (raw time / spmd "
        "time) >= 0.9; Reduce mode fused ratio <= 1.0 (below).", "",
        "Reduce mode against AllReduce mode, the same SGD step (fused: one reduce-scatter of "
        "the gradients and one all-gather of the parameters; per gradient: one reduce each, "
        "then a broadcast per owner):", "", *reduce_rows, "",
        f"Adam optimizer state per rank at {two['ranks']} ranks: AllReduce mode "
        f"{two['state_allreduce'] / 1e6:.2f} MB; Reduce mode {state} "
        f"(ratio {max(two['state_reduce']) / two['state_allreduce']:.2f}; ideal "
        f"1/{two['ranks']}).", "",
        "Python calls a step on rank 0 (cProfile's count, functions and builtins; "
        "deterministic, whatever the load): " + "; ".join(
            f"{r['ranks']} rank(s): AllReduce mode {r['calls']['allreduce']:.0f}, Reduce mode "
            f"{r['calls']['reduce']:.0f}" for r in results) + ".",
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = measure_rank(args.rounds, args.steps)
        from mpi4py import MPI

        if MPI.COMM_WORLD.rank == 0:
            print(json.dumps(result), flush=True)
        return
    write_report(report([launch(n, args) for n in (1, 2)], args), args.out)


if __name__ == "__main__":
    main()
