"""Hierarchical allreduce: MPI latency and bandwidth measured here, then a cost MODEL (alpha-beta,
not a measurement) of step time and scaling efficiency from 2 to 1024 ranks for flat
AllReduce, hierarchical AllReduce (BuildStrategy.use_hierarchical_allreduce: reduce within a
node, allreduce across node leaders, broadcast within the node) and Reduce mode.

Measured here (mpiexec -n 2, two processes of one machine, MPICH over shared memory): the time
of Allreduce, Reduce and Bcast from 8 B to 16 MiB (latency: the 8-byte time; bandwidth: the
slope over 1-16 MiB), numpy's add rate (the reduction arithmetic), and per workload its compute
and Adam-update time on one rank. The intra-node parameters of the model are these.

Assumed (one machine here, so nothing across nodes can be measured): the inter-node link, one
NIC per node shared by its ranks (latency and bandwidth given by --inter-us / --inter-gbps;
two networks printed by default), ranks packed --per-node to a node, and the algorithms:

- flat AllReduce: the fastest of recursive doubling (small messages), Rabenseifner (recursive
  halving reduce-scatter + recursive doubling all-gather, MPICH's large-message algorithm:
  its first, largest steps cross nodes, every rank of a node through the one NIC at once) and
  a ring (paced by its node-crossing hop);
- hierarchical: a binomial-tree Reduce and Bcast inside the node, each tree level costing one
  2-rank Reduce/Bcast as measured here, and the fastest flat algorithm among the node
  leaders (one rank per NIC: no sharing);
- Reduce mode (spmd's: a reduce-scatter of the gradients and an all-gather of the updated
  parameters): halving/doubling or ring, and the optimizer update on 1/p of the parameters;
- step = compute + communication + update, nothing overlapped (spmd fuses gradients into
  buckets of 32 MB: both workloads are one bucket, issued after the last gradient); weak
  scaling: a fixed batch per rank; efficiency = step(1 rank) / step(p ranks).

    python bench/hierarchical_model.py [--per-node 8] [--inter-us 2 --inter-gbps 12.5]
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import pathlib  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

MESSAGE_BYTES = [8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]
RANKS = [2 ** i for i in range(1, 11)]  # 2 .. 1024
NETWORKS = [("100 Gb/s InfiniBand-class", 2.0, 12.5), ("25 GbE, TCP", 25.0, 3.1)]
RESNET20_PARAMS = 272_474  # He et al. 2016, CIFAR-10 ResNet-20: 0.27 M parameters


# -- measured -------------------------------------------------------------------------------
def _best_time(comm, fn, nbytes: int) -> float:
    """Seconds per call in the best of 7 rounds of calls sized to the message, ranks in step
    (the best: this small machine is shared, and other work only ever adds time)."""
    calls = max(4, min(1000, int(32e6 / max(nbytes, 4096))))
    samples = []
    for _ in range(7):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls)
    return min(samples)


def measure_collectives() -> dict:
    """Under mpiexec -n 2: op -> [(bytes, seconds)] for Allreduce, Reduce and Bcast."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    out: dict = {"allreduce": [], "reduce": [], "bcast": []}
    for nbytes in MESSAGE_BYTES:
        for name, fn in _calls(comm, MPI, np.ones(nbytes // 4, np.float32)).items():
            fn()  # warm: connections, first touch
            out[name].append((nbytes, _best_time(comm, fn, nbytes)))
    return out


def _calls(comm, MPI, buf) -> dict:
    """The three blocking collectives on `buf`, in place, as spmd's MPI backend calls them."""
    if comm.rank == 0:
        def reduce():
            comm.Reduce(MPI.IN_PLACE, buf, op=MPI.SUM, root=0)
    else:
        def reduce():
            comm.Reduce(buf, None, op=MPI.SUM, root=0)
    return {"allreduce": lambda: comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM),
            "reduce": reduce, "bcast": lambda: comm.Bcast(buf, root=0)}


def measure_local() -> dict:
    """One process: numpy's add (s/byte), and each workload's compute and Adam update."""
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    from mlp import BATCH, SIZES, numpy_grads

    a, b = np.ones(4 << 20, np.float32), np.ones(4 << 20, np.float32)
    gamma = _best(lambda: np.add(a, b, out=a), 20) / a.nbytes
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((i, o)).astype(np.float32) * 0.05,
               np.zeros(o, np.float32)) for i, o in zip(SIZES[:-1], SIZES[1:])]
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], size=(BATCH, 1))
    compute = _best(lambda: numpy_grads(params, x, y, BATCH), 10)
    count = sum(w.size + bias.size for w, bias in params)
    update = _best(_adam(count), 10)
    return {"gamma": gamma, "mlp_params": count, "mlp_compute": compute,
            "adam_per_param": update / count, "batch": BATCH, "sizes": list(SIZES)}


def _adam(count: int):
    p, g, m, v = (np.ones(count, np.float32) for _ in range(4))
    tmp = np.empty_like(p)

    def step():  # Adam's update, in place, as numpy does it: about 10 passes
        np.multiply(m, 0.9, out=m)
        np.multiply(g, 0.1, out=tmp)
        np.add(m, tmp, out=m)
        np.multiply(v, 0.999, out=v)
        np.multiply(g, g, out=tmp)
        np.multiply(tmp, 0.001, out=tmp)
        np.add(v, tmp, out=v)
        np.sqrt(v, out=tmp)
        np.add(tmp, 1e-8, out=tmp)
        np.divide(m, tmp, out=tmp)
        np.multiply(tmp, 0.001, out=tmp)
        np.subtract(p, tmp, out=p)

    return step


def _best(fn, calls: int) -> float:
    """Seconds of the fastest of `calls` calls (after one to warm up)."""
    fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def fit(points) -> tuple[float, float]:
    """(latency s: the 8-byte time, s/byte: least-squares slope over 1-16 MiB)."""
    big = [(n, t) for n, t in points if n >= 1 << 20]
    slope = float(np.polyfit([n for n, _ in big], [t for _, t in big], 1)[0])
    return points[0][1], max(slope, 1e-13)


# -- the model ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    alpha: float  # s per message
    beta: float  # s per byte


@dataclass(frozen=True)
class Machine:
    intra: Link  # one exchange step inside a node (a 2-rank Allreduce is two: 2a + m b)
    reduce: Link  # one 2-rank Reduce inside a node, as measured
    bcast: Link  # one 2-rank Bcast inside a node, as measured
    inter: Link  # one message between nodes (assumed), through the node's one NIC
    gamma: float  # s per byte of reduction arithmetic
    per_node: int


def _lg(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


def allreduce_algorithms(m: float, p: int, k: int, near: Link, far: Link, gamma: float
                         ) -> dict:
    """Seconds of each flat allreduce algorithm over p ranks packed k to a node (k = p: one
    node; k = 1: one rank per NIC): node-crossing steps use `far`, shared by the k ranks of
    the node at once; the others `near`."""
    nodes = max(1, p // k)
    k = p // nodes
    if p == 1:
        return {"none": 0.0}
    crossing, inside = _lg(nodes), _lg(k)
    # a ring step ends when its slowest hop does: a node-crossing one where there are nodes
    hop = max(near.alpha + m / p * near.beta,
              far.alpha + m / p * far.beta if nodes > 1 else 0.0)
    return {
        "recursive doubling": crossing * (far.alpha + k * m * far.beta)
        + inside * (near.alpha + m * near.beta) + _lg(p) * m * gamma,
        "Rabenseifner": 2 * (crossing * far.alpha + (1 - 1 / nodes) * m * k * far.beta
                             + inside * near.alpha + (1 / nodes - 1 / p) * m * near.beta)
        + (p - 1) / p * m * gamma,
        "ring": 2 * (p - 1) * hop + (p - 1) / p * m * gamma,
    }


def flat_allreduce(m: float, p: int, mc: Machine) -> float:
    return min(allreduce_algorithms(m, p, min(mc.per_node, p), mc.intra, mc.inter,
                                    mc.gamma).values())


def hierarchical_allreduce(m: float, p: int, mc: Machine, measured: bool = True) -> float:
    """`measured`: the node's Reduce and Bcast as binomial trees whose levels cost what a
    2-rank Reduce/Bcast costs here; else at the intra-node Allreduce's rate (a reduce-scatter
    + gather, a scatter + all-gather: what a better intra-node Reduce/Bcast would cost)."""
    k = min(mc.per_node, p)
    nodes = p // k
    if nodes == 1 or k == 1:  # spmd takes the flat path there
        return flat_allreduce(m, p, mc)
    if measured:
        inside = _lg(k) * (mc.reduce.alpha + m * mc.reduce.beta + mc.bcast.alpha
                           + m * mc.bcast.beta)
    else:
        a, b, share = mc.intra.alpha, mc.intra.beta, (k - 1) / k * m
        inside = (2 * _lg(k) * a + 2 * share * b + share * mc.gamma  # reduce
                  + (_lg(k) + k - 1) * a + 2 * share * b)  # broadcast
    leaders = min(allreduce_algorithms(m, nodes, 1, mc.inter, mc.inter, mc.gamma).values())
    return inside + leaders


def reduce_mode_comm(m: float, p: int, mc: Machine) -> float:
    """A reduce-scatter plus an all-gather: Rabenseifner's or the ring's two halves."""
    algs = allreduce_algorithms(m, p, min(mc.per_node, p), mc.intra, mc.inter, mc.gamma)
    return min(algs["Rabenseifner"], algs["ring"])


def table(name: str, grad_bytes: float, compute: float, update: float, mc: Machine) -> list:
    one = compute + update
    rows = [f"{name}: {grad_bytes / 1e6:.2f} MB of float32 gradients, compute "
            f"{compute * 1e3:.2f} ms and Adam update {update * 1e3:.2f} ms per step per rank; "
            f"{mc.per_node} ranks per node.", "",
            "| ranks | nodes | flat AllReduce: comm ms, step ms, efficiency | hierarchical "
            "(node Reduce/Bcast as measured) | hierarchical (node stages at Allreduce's rate) "
            "| Reduce mode |", "|---|---|---|---|---|---|"]
    for p in RANKS:
        flat = flat_allreduce(grad_bytes, p, mc)
        hier = hierarchical_allreduce(grad_bytes, p, mc)
        better = hierarchical_allreduce(grad_bytes, p, mc, measured=False)
        red = reduce_mode_comm(grad_bytes, p, mc)
        cells = []
        for comm, upd in ((flat, update), (hier, update), (better, update), (red, update / p)):
            step = compute + comm + upd
            cells.append(f"{comm * 1e3:.3f}, {step * 1e3:.2f}, {one / step:.0%}")
        rows.append(f"| {p} | {max(1, p // mc.per_node)} | " + " | ".join(cells) + " |")
    return rows


# -- running it -----------------------------------------------------------------------------
def launch() -> dict:
    mpiexec = pathlib.Path(sys.executable).parent / "mpiexec"
    cmd = [str(mpiexec), "-n", "2", sys.executable, __file__, "--worker"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads([ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1])


def report(measured: dict, local: dict, args) -> str:
    fits = {op: fit(points) for op, points in measured.items()}
    lines = ["# Hierarchical allreduce: measured parameters and a cost MODEL", "",
             "## Measured here: MPICH, 2 processes on one machine (shared memory)", "",
             "| op | " + " | ".join(_size(n) for n in MESSAGE_BYTES) + " | latency us | "
             "bandwidth GB/s |", "|---" * (len(MESSAGE_BYTES) + 3) + "|"]
    for op, points in measured.items():
        lat, slope = fits[op]
        lines.append(f"| {op} | " + " | ".join(f"{t * 1e6:.1f}" for _, t in points)
                     + f" | {lat * 1e6:.1f} | {1e-9 / slope:.2f} |")
    lines += ["", "(microseconds per call, best of 7 rounds; latency: the 8-byte call; bandwidth: "
              "1 / slope over 1-16 MiB)", "",
              f"numpy add: {1e-9 / local['gamma']:.1f} GB/s; Adam update "
              f"{local['adam_per_param'] * 1e9:.2f} ns per parameter; MLP "
              f"{'-'.join(map(str, local['sizes']))} forward + backward at batch "
              f"{local['batch']}: {local['mlp_compute'] * 1e3:.2f} ms (one BLAS thread).", "",
              "## MODEL, NOT MEASUREMENT: predicted step time and weak-scaling efficiency", "",
              "Intra-node parameters are the measured ones above; the inter-node ones are "
              "ASSUMPTIONS (one machine here). Algorithms and assumptions: see the module "
              "docstring of bench/hierarchical_model.py. Cells: communication ms, step ms, "
              "efficiency (step at 1 rank / step at p ranks; Reduce mode can pass 100%: its "
              "update runs on 1/p of the parameters).", ""]
    (ar_lat, ar_slope), (rd_lat, rd_slope), (bc_lat, bc_slope) = (
        fits["allreduce"], fits["reduce"], fits["bcast"])
    networks = NETWORKS if args.inter_us is None else [("given", args.inter_us,
                                                        args.inter_gbps)]
    workloads = [("MLP (bench/mlp.py, compute measured here)", local["mlp_params"] * 4,
                  local["mlp_compute"], local["adam_per_param"] * local["mlp_params"]),
                 (f"ResNet-20-sized gradient ({RESNET20_PARAMS:,} parameters; compute ASSUMED "
                  f"{args.resnet_ms:g} ms, a GPU-class device)", RESNET20_PARAMS * 4,
                  args.resnet_ms * 1e-3, local["adam_per_param"] * RESNET20_PARAMS)]
    for net, us, gbps in networks:
        mc = Machine(intra=Link(ar_lat / 2, ar_slope), reduce=Link(rd_lat, rd_slope),
                     bcast=Link(bc_lat, bc_slope), inter=Link(us * 1e-6, 1e-9 / gbps),
                     gamma=local["gamma"], per_node=args.per_node)
        lines += [f"### Network (assumed): {net}, {us:g} us, {gbps:g} GB/s per node", ""]
        for workload in workloads:
            lines += table(*workload, mc) + [""]
    lines.append("MODEL, NOT MEASUREMENT: only the first table above was measured.")
    return "\n".join(lines)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 else f"{n} B"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-node", type=int, default=8, help="ranks per node (default 8)")
    parser.add_argument("--inter-us", type=float, default=None,
                        help="inter-node latency, us (default: two networks)")
    parser.add_argument("--inter-gbps", type=float, default=12.5,
                        help="inter-node bandwidth per node, GB/s (with --inter-us)")
    parser.add_argument("--resnet-ms", type=float, default=5.0,
                        help="assumed compute ms per step of the ResNet-20-sized workload")
    parser.add_argument("--out", default=None, help="also write the report there")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = measure_collectives()
        from mpi4py import MPI

        if MPI.COMM_WORLD.rank == 0:
            print(json.dumps(result), flush=True)
        return
    text = report(launch(), measure_local(), args)
    print(text)
    if args.out:
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
