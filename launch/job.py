"""launch(config): run the job a LaunchConfig describes, whatever its kind: a collective job
on this machine (launch/collective.py) or across nodes (launch/multinode.py), a
parameter-server job (launch/ps.py), or, started by an MPI process manager, this process
becoming one rank. Every kind is watched by the one process supervisor, launch/supervisor.py.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from . import scheduler as sched
from .collective import CollectiveJob, command, worker_program
from .config import LaunchConfig, format_config
from .env import mpi_worker_env, ps_mpi_env
from .supervisor import die_with_launcher, kill

__all__ = ["CollectiveJob", "command", "launch", "worker_program"]


def launch(config: LaunchConfig) -> int:
    """Run the job `config` describes; return the launcher's exit status (0: every worker
    succeeded; the root cause's exit code, or 128 + its signal, when one failed).

    >>> from launch import launch, resolve_config
    >>> launch(resolve_config("train.py", nproc_per_node=2))  # doctest: +SKIP
    0
    """
    if config.scheduler == sched.MPI:
        _become_worker(config)
    if config.server_num:
        from .ps import PSJob, format_ps_config

        if config.print_config:
            print(format_ps_config(config), flush=True)
        return PSJob(config).run()
    if config.print_config:
        print(format_config(config), flush=True)
    if config.joins_by_rendezvous:
        from .multinode import join_job, start_node_zero

        return start_node_zero(config) if config.node_index == 0 else join_job(config)
    return CollectiveJob(config).run()


def _become_worker(config: LaunchConfig) -> None:
    """Started by an MPI process manager: this process is one rank; run the script in it."""
    rank, size = sched.mpi_rank_size(os.environ)
    if config.print_config and rank == 0:
        timeout = (f"{config.collective_timeout:g} s" if config.collective_timeout is not None
                   else "SPMD_COLLECTIVE_TIMEOUT, else 1800 s")
        print(f"paddle-launch configuration:\n"
              f"  scheduler          : mpi (started by an MPI process manager: each of its "
              f"{size} process(es) runs the script itself)\n"
              f"  training script    : {' '.join(worker_program(config)[3:])}\n"
              f"  collective_timeout : {timeout}"
              + (f"\n  roles              : ranks 0-{config.server_num - 1} pservers, ranks "
                 f"{config.server_num}-{size - 1} trainers (parameter-server mode)"
                 if config.server_num else ""), flush=True)
    if config.server_num:  # parameter-server mode: the first server_num ranks serve
        try:
            env = ps_mpi_env(rank, size, config.server_num, os.environ)
        except ValueError as e:
            print(f"paddle-launch: error: [rank {rank}/{size}] {e}", file=sys.stderr, flush=True)
            sys.exit(2)
        sys.exit(_run_ps_rank(config, rank, size, env))
    gpu = None
    local = sched.mpi_local_rank(os.environ)
    if config.selected_gpus and local is not None:
        gpu = config.selected_gpus[local % len(config.selected_gpus)]
    env = mpi_worker_env(rank, size, os.environ, config.collective_timeout, gpu)
    sys.stdout.flush()
    os.execve(config.python, worker_program(config), env)


def _run_ps_rank(config: LaunchConfig, rank: int, size: int, env: dict) -> int:
    """One rank of a parameter-server job under an MPI process manager: run the script as a
    child and, when it fails, end the whole job. A process that never started MPI and exits
    non-zero does not make Hydra stop the others (a pserver would serve on); a rank killed by
    a signal does, so this one kills itself with SIGTERM after saying who failed."""
    role = f"pserver {rank}" if rank < config.server_num else \
        f"trainer {rank - config.server_num}"
    sys.stdout.flush()
    child = subprocess.Popen(worker_program(config), env=env, preexec_fn=die_with_launcher)

    def forward(signum, frame):
        kill(child.pid, signum)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)
    rc = child.wait()
    if rc == 0:
        return 0
    how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
    print(f"paddle-launch: [rank {rank}/{size}] {role} (PADDLE_TRAINING_ROLE="
          f"{env['PADDLE_TRAINING_ROLE']}) failed, {how}: ending the job", file=sys.stderr,
          flush=True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
    return rc  # not reached
