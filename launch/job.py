"""launch(config): start the workers through the MPI process manager, show rank 0's output,
and end the job cleanly: on the first failure, ask the ranks still running where they are,
stop them all within seconds, and report.

The launcher, not the process manager, stops a single-node job (Hydra's -disable-auto-cleanup):
only it can ask the other ranks for their stacks first. Across nodes the process manager keeps
that job, since the launcher cannot see the other machines' processes.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from . import scheduler as sched
from .config import LaunchConfig, format_config
from .early_exit import early_exit_reason, left_before_first_collective, left_early
from .env import (
    TOKEN_ENV,
    fresh_token,
    job_env,
    mpi_worker_env,
    ps_mpi_env,
    rank_env,
    without_proxies,
)
from .mpi import build_command
from .report import Outcome, format_report

POLL_S = 0.05
STACK_WAIT_S = 1.0  # how long stopped ranks get to dump their stacks
TERM_WAIT_S = 3.0  # SIGTERM, then SIGKILL after this
WATCHDOG_GRACE_S = 10.0  # past the collective timeout, the launcher stops a waiting rank itself
STOPPED_BY_PEER = "StoppedByPeer:"  # the error of a rank spmd stopped because a peer left


def worker_program(config: LaunchConfig) -> list[str]:
    """What each rank runs."""
    return [config.python, "-m", "spmd.run", config.training_script,
            *config.training_script_args]


def command(config: LaunchConfig, base_env=None) -> list[str]:
    """The process manager's full command line for `config` (across nodes where every node
    runs paddle-launch: Hydra's manual bootstrap, see launch/multinode.py)."""
    base_env = os.environ if base_env is None else base_env
    single_node = len(config.cluster_node_ips) == 1
    return build_command(config.mpi, config.cluster_node_ips, config.nproc_per_node,
                         job_env(config, base_env),
                         [rank_env(config, r) for r in range(config.world_size)],
                         worker_program(config), launcher_stops_job=single_node,
                         manual=config.joins_by_rendezvous)


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
    return _Job(config).run()


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
    child = subprocess.Popen(worker_program(config), env=env, preexec_fn=_die_with_launcher)

    def forward(signum, frame):
        _kill(child.pid, signum)

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


def _alive(pid: int | None) -> bool:
    """Whether a process runs (a zombie does not: nobody may reap it in a container)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


def _kill(pid: int | None, sig: int) -> None:
    if pid:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _die_with_launcher() -> None:
    """In the process manager (before exec): SIGTERM when the launcher dies, so even a
    SIGKILLed launcher leaves no job behind (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _Follower:
    """Copies what a file gains to a stream: rank 0's log to the console."""

    def __init__(self, path: str, stream):
        self.path, self.stream, self.offset = path, stream, 0

    def pump(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        if data:
            self.offset += len(data)
            self.stream.write(data)
            self.stream.flush()


class _Job:
    def __init__(self, config: LaunchConfig):
        self.config = config
        self.ranks = range(config.world_size)
        self.signal: int | None = None
        self.statuses: dict = {}
        self.mpi_log = os.path.join(config.log_dir, "mpi.log")

    def run(self) -> int:
        self._prepare_log_dir()
        previous = {s: signal.signal(s, self._on_signal)
                    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            env = without_proxies(os.environ)
            # the workers' channel admits only this job's processes (spmd.job_token); in the
            # environment, not on the command line, where every user of the machine sees it
            env[TOKEN_ENV] = env.get(TOKEN_ENV) or fresh_token()
            self.proc = self._start_process_manager(env)
            return self._watch()
        finally:
            self._close()
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _start_process_manager(self, env: dict) -> subprocess.Popen:
        with open(self.mpi_log, "wb") as out:
            return subprocess.Popen(
                command(self.config), env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_launcher)

    def _check(self) -> str:
        """Why the job must end now although no worker failed ('' while none): a rank that
        left before the job's first collective, which the others wait for in MPI start-up."""
        return left_before_first_collective(self.statuses, self.config.rank_status,
                                            socket.gethostname())

    def _close(self) -> None:
        """Release what the job holds besides its processes (nothing here)."""

    def _on_signal(self, signum, frame) -> None:
        self.signal = signum

    def _prepare_log_dir(self) -> None:
        """Remove a previous run's files, which would be read as this run's."""
        os.makedirs(self.config.log_dir, exist_ok=True)
        ours = {"mpi.log", "failure_report.txt"}
        for rank in self.ranks:
            ours |= {os.path.basename(self.config.rank_log(rank)),
                     os.path.basename(self.config.rank_status(rank))}
        for name in os.listdir(self.config.log_dir):
            # workerstatus.N and what the worker derives from it (its stack dump)
            if name in ours or name.split(".stack")[0] in ours:
                os.remove(os.path.join(self.config.log_dir, name))

    def _read_statuses(self) -> None:
        from spmd.status_file import read_status

        for rank in self.ranks:
            status = read_status(self.config.rank_status(rank))
            if status.started is not None or status.ended is not None:
                self.statuses[rank] = status

    def _watch(self) -> int:
        from spmd.flags import flags

        try:
            timeout = self.config.collective_timeout or flags().collective_timeout_s
        except ValueError:  # a bad SPMD_COLLECTIVE_TIMEOUT: every worker fails and says so
            timeout = float("inf")
        console = _Follower(self.config.rank_log(0), sys.stdout.buffer)
        while True:
            console.pump()
            self._read_statuses()
            if any(s.failed for s in self.statuses.values()):
                return self._fail(console, reason="")
            if self.signal is not None:
                name = signal.Signals(self.signal).name
                return self._fail(console, reason=f"paddle-launch got {name}",
                                  code=128 + self.signal)
            hung = self._hung(timeout)
            if hung:
                return self._fail(console, reason=hung)
            why = self._check()
            if why:
                return self._fail(console, reason=why, code=1)
            rc = self.proc.poll()
            if rc is not None:
                console.pump()
                self._read_statuses()
                if any(s.failed for s in self.statuses.values()):
                    return self._fail(console, reason="")
                if rc == 0:
                    return 0
                return self._fail(console, reason=f"the process manager exited with code {rc} "
                                                  f"and no worker recorded a failure", code=rc)
            time.sleep(POLL_S)

    def _hung(self, timeout: float) -> str:
        """A rank waiting in a collective well past the timeout (stuck where spmd's own
        timeout cannot fire)."""
        now = time.time()
        for rank, status in self.statuses.items():
            for op, since in status.waiting:
                if status.ended is None and now - since > timeout + WATCHDOG_GRACE_S:
                    return (f"rank {rank} waited in {op} for {now - since:.0f} s, past the "
                            f"collective timeout of {timeout:g} s")
        return ""

    def _running(self) -> list[int]:
        """Ranks on this machine still running (on a shared file system, the status files of
        other machines' ranks are readable too, but their pids are not ours to signal)."""
        host = socket.gethostname()
        return [r for r, s in self.statuses.items()
                if s.ended is None and s.host == host
                and (_alive(s.pid) or _alive(s.supervisor_pid))]

    def _fail(self, console: _Follower, reason: str, code: int | None = None) -> int:
        running = self._running()
        stacks = self._collect_stacks(running)
        stop_time = time.time()
        self._stop(running)
        console.pump()
        self._read_statuses()
        # A rank that failed by itself while being asked for its stack (the others of a
        # collective timeout) was not stopped by the launcher.
        stopped = {r for r in running
                   if self.statuses[r].error_time is None
                   or self.statuses[r].error_time > stop_time}
        failed = {r: s for r, s in self.statuses.items() if s.failed and r not in stopped}
        # a rank that spmd stopped because a peer left (StoppedByPeer) is not the cause
        causes = {r: s for r, s in failed.items()
                  if not (s.error or "").startswith(STOPPED_BY_PEER)}
        if failed and not causes and not reason:
            early = left_early(self.statuses, self.config.rank_status)
            first = failed[min(failed, key=lambda r: failed[r].failed_at)]
            # spmd's words name the rank that left (its supervisor may still stand in for it)
            reason = (early_exit_reason(early[0], self.statuses[early[0]], sorted(failed))
                      if early else first.error.split("stopped: ", 1)[-1])
            errors = [f"rank {r}: {s.error}" for r, s in sorted(self.statuses.items())
                      if s.error and r not in failed]
            if errors:  # the error the rank that left recorded (it has not ended yet)
                reason += "; " + "; ".join(errors)
            code = 1 if code is None else code
        failed = causes or failed
        root = min(failed, key=lambda r: failed[r].failed_at) if failed and not \
            (reason and not causes) else None
        outcome = Outcome(self.statuses, self.config.world_size, root=root, stopped=stopped,
                          stacks=stacks, reason=reason, mpi_log=self.mpi_log)
        text = format_report(outcome, self.config.log_dir, self.config.rank_log)
        sys.stdout.flush()
        print(text, file=sys.stderr, flush=True)
        with open(os.path.join(self.config.log_dir, "failure_report.txt"), "w") as f:
            f.write(text + "\n")
        if code is not None:
            return code
        status = self.statuses[root] if root is not None else None
        if status is not None and status.signal is not None:
            return 128 + status.signal
        return (status.exit_code if status is not None else None) or 1

    def _collect_stacks(self, running: list[int]) -> dict:
        """Ask each running rank for its Python stack (faulthandler, see spmd/run.py)."""
        from spmd.run import STACK_SIGNAL, stack_path

        for rank in running:
            _kill(self.statuses[rank].pid, STACK_SIGNAL)
        stacks: dict = {}
        seen: dict = {}
        deadline = time.monotonic() + STACK_WAIT_S
        while len(stacks) < len(running) and time.monotonic() < deadline:
            time.sleep(POLL_S)
            for rank in running:
                try:
                    with open(stack_path(self.config.rank_status(rank))) as f:
                        text = f.read()
                except FileNotFoundError:
                    text = ""
                # Done when the dump stopped growing, or when there is no one left to dump.
                if (text and text == seen.get(rank)) or not _alive(self.statuses[rank].pid):
                    stacks[rank] = text
                seen[rank] = text
        return stacks

    def _stop(self, running: list[int]) -> None:
        """SIGTERM every local worker and the process manager, SIGKILL what is left."""
        pids = [p for r in running
                for p in (self.statuses[r].pid, self.statuses[r].supervisor_pid) if p]
        for sig, wait in ((signal.SIGTERM, TERM_WAIT_S), (signal.SIGKILL, TERM_WAIT_S)):
            for pid in pids:
                _kill(pid, sig)
            if self.proc.poll() is None:
                self.proc.send_signal(sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if self.proc.poll() is not None and not any(_alive(p) for p in pids):
                    return
                time.sleep(POLL_S)
