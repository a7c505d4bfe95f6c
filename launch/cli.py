"""`paddle-launch` (also `python -m launch`): fluid's launch flags, parsed into a LaunchConfig.

    paddle-launch --nproc_per_node 2 train.py --epochs 3
    paddle-launch --selected_gpus 0,1 train.py
    paddle-launch --server_num 2 --worker_num 2 train.py   # parameter-server mode
    paddle-launch --cluster_node_ips 10.0.0.1,10.0.0.2 --node_ip 10.0.0.1 train.py  # each node

Bad usage gets one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import sys

from .config import UsageError, resolve_config

PROG = "paddle-launch"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's usage block would bury the one line that matters
        raise UsageError(message)


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    """The command line: fluid 1.8's `paddle.distributed.launch` flags plus --nproc_per_node
    and --collective_timeout."""
    p = _Parser(prog=PROG, description="Start a data-parallel spmd training job: one worker "
                "per GPU (or --nproc_per_node CPU workers) on each node, through MPI.")
    p.add_argument("--cluster_node_ips", default=None,
                   help="comma-separated node addresses, in rank order (default: this machine; "
                        "inside SLURM: the allocation's nodes)")
    p.add_argument("--node_ip", default=None,
                   help="this machine's entry of --cluster_node_ips")
    p.add_argument("--started_port", type=int, default=None,
                   help="first port of the workers' endpoints (default: free ports)")
    p.add_argument("--selected_gpus", default=None,
                   help="comma-separated GPU ids, one worker each (default: every visible GPU)")
    p.add_argument("--nproc_per_node", type=int, default=None,
                   help="workers per node for a CPU run (default: 1, or one per GPU)")
    p.add_argument("--log_dir", default="log",
                   help="directory of the workers' logs, workerlog.N (default: ./log)")
    p.add_argument("--print_config", type=_bool, default=True, metavar="BOOL",
                   help="print the resolved configuration: true or false (default: true)")
    p.add_argument("--collective_timeout", type=float, default=None,
                   help="seconds a collective may wait before the job fails (default: "
                        "SPMD_COLLECTIVE_TIMEOUT, else 1800)")
    p.add_argument("--bootstrap", choices=("rendezvous", "ssh"), default="rendezvous",
                   help="a job across nodes (outside SLURM): rendezvous (default: run the same "
                        "paddle-launch command on every node; node 0 starts the job and the "
                        "others join it, no ssh) or ssh (run it on node 0 only; MPI starts the "
                        "other nodes' workers through ssh)")
    p.add_argument("--join_timeout", type=float, default=None,
                   help="seconds node 0 waits for the other nodes' paddle-launch to join, and "
                        "they for node 0 (default: SPMD_JOIN_TIMEOUT, else 300)")
    p.add_argument("--server_num", type=int, default=None,
                   help="parameter-server mode: this many pservers (local: started here on "
                        "free ports, serverlog.N; under mpiexec/srun: the first N ranks serve)")
    p.add_argument("--worker_num", type=int, default=None,
                   help="parameter-server mode: this many trainers started here (workerlog.N)")
    p.add_argument("training_script", help="the training script, run on every worker")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER,
                   help="arguments for the training script")
    return p


def parse(argv: list[str] | None = None, env=None):
    """Parse and resolve a command line into a LaunchConfig; raises UsageError."""
    args = build_parser().parse_args(argv)
    return resolve_config(
        args.training_script, args.training_script_args,
        nproc_per_node=args.nproc_per_node, selected_gpus=args.selected_gpus,
        cluster_node_ips=args.cluster_node_ips, node_ip=args.node_ip,
        started_port=args.started_port, log_dir=args.log_dir, print_config=args.print_config,
        collective_timeout=args.collective_timeout, env=env,
        server_num=args.server_num, worker_num=args.worker_num, bootstrap=args.bootstrap,
        join_timeout=args.join_timeout)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `paddle-launch`; returns the exit status."""
    from .job import launch

    try:
        config = parse(argv)
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    return launch(config)


if __name__ == "__main__":
    sys.exit(main())
