"""The collective job on this machine (and node 0's part of one across nodes): start every
rank through the MPI process manager, show rank 0's output, and end the job cleanly: on the
first failure, ask the ranks still running where they are, stop them all within seconds, and
report (launch/report.py).

The launcher, not the process manager, stops a single-node job (Hydra's -disable-auto-cleanup):
only it can ask the other ranks for their stacks first. Across nodes the process manager keeps
that job, since the launcher cannot see the other machines' processes.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import time

from .config import LaunchConfig
from .early_exit import early_exit_reason, left_before_first_collective, left_early
from .env import TOKEN_ENV, fresh_token, job_env, rank_env, without_proxies
from .mpi import build_command
from .report import Outcome, format_report
from .supervisor import POLL_S, Supervisor, alive, die_with_launcher, escalate, kill

STACK_WAIT_S = 1.0  # how long stopped ranks get to dump their stacks
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


class CollectiveJob(Supervisor):
    """A collective job: every rank through the process manager, watched through the ranks'
    status files."""

    def __init__(self, config: LaunchConfig):
        super().__init__(config.log_dir, config.rank_log(0))
        self.config = config
        self.ranks = range(config.world_size)
        self.statuses: dict = {}
        self.mpi_log = os.path.join(config.log_dir, "mpi.log")
        self.timeout = float("inf")

    def start(self) -> None:
        from spmd.flags import flags

        self._prepare_log_dir()
        try:
            self.timeout = self.config.collective_timeout or flags().collective_timeout_s
        except ValueError:  # a bad SPMD_COLLECTIVE_TIMEOUT: every worker fails and says so
            self.timeout = float("inf")
        env = without_proxies(os.environ)
        # the workers' channel admits only this job's processes (spmd.job_token); in the
        # environment, not on the command line, where every user of the machine sees it
        env[TOKEN_ENV] = env.get(TOKEN_ENV) or fresh_token()
        self.proc = self._start_process_manager(env)

    def _start_process_manager(self, env: dict) -> subprocess.Popen:
        with open(self.mpi_log, "wb") as out:
            return subprocess.Popen(
                command(self.config), env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_launcher)

    def _check(self) -> str:
        """Why the job must end now although no worker failed ('' while none): a rank that
        left before the job's first collective, which the others wait for in MPI start-up."""
        return left_before_first_collective(self.statuses, self.config.rank_status,
                                            socket.gethostname())

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

    def poll(self) -> int | None:
        self._read_statuses()
        if any(s.failed for s in self.statuses.values()):
            return self._fail(reason="")
        hung = self._hung(self.timeout)
        if hung:
            return self._fail(reason=hung)
        why = self._check()
        if why:
            return self._fail(reason=why, code=1)
        rc = self.proc.poll()
        if rc is None:
            return None
        self.console.pump()
        self._read_statuses()
        if any(s.failed for s in self.statuses.values()):
            return self._fail(reason="")
        if rc == 0:
            return 0
        told = self._told_by_spmd() or self._root_block_in_mpi_log()
        return self._fail(reason=told or f"the process manager exited with code {rc} and no "
                                         f"worker recorded a failure", code=rc)

    def _root_block_in_mpi_log(self) -> str:
        """The first line of spmd's root-cause block (`[rank r/n] FAILED ...`) that a rank's
        supervisor printed to the process manager, when the job was aborted before any rank
        could record it."""
        try:
            with open(self.mpi_log, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if re.match(r"\[rank \d+/\d+\] FAILED ", line):
                        return line.strip()
        except OSError:
            pass
        return ""

    def _told_by_spmd(self) -> str:
        """spmd's own words for a job it ended because a rank left (a StoppedByPeer error
        names that rank), with the errors the other ranks recorded; '' when none."""
        stopped = {r: s for r, s in sorted(self.statuses.items())
                   if (s.error or "").startswith(STOPPED_BY_PEER)}
        errors = [f"rank {r}: {s.error}" for r, s in sorted(self.statuses.items())
                  if s.error and r not in stopped]
        if stopped:
            reason = next(iter(stopped.values())).error.split("stopped: ", 1)[-1]
            return reason + "".join(f"; {e}" for e in errors)
        return "; ".join(errors)

    def fail_for_signal(self, reason: str, code: int) -> int:
        return self._fail(reason=reason, code=code)

    def close(self) -> None:
        """Nothing to release: the process manager ended (poll) or was stopped (_fail)."""

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
                and (alive(s.pid) or alive(s.supervisor_pid))]

    def _fail(self, reason: str, code: int | None = None) -> int:
        running = self._running()
        stacks = self._collect_stacks(running)
        stop_time = time.time()
        self._stop(running)
        self.console.pump()
        self._read_statuses()
        # A rank that failed by itself while being asked for its stack (the others of a
        # collective timeout) was not stopped by the launcher.
        stopped = {r for r in running
                   if self.statuses[r].error_time is None
                   or self.statuses[r].error_time > stop_time}
        root, reason, code = self._root_cause(stopped, reason, code)
        outcome = Outcome(self.statuses, self.config.world_size, root=root, stopped=stopped,
                          stacks=stacks, reason=reason, mpi_log=self.mpi_log)
        self.write_report(format_report(outcome, self.config.log_dir, self.config.rank_log))
        if code is not None:
            return code
        status = self.statuses[root] if root is not None else None
        if status is not None and status.signal is not None:
            return 128 + status.signal
        return (status.exit_code if status is not None else None) or 1

    def _root_cause(self, stopped: set, reason: str, code: int | None):
        """(the rank that failed first, the reason, the exit code) of a failed job. A rank
        that spmd stopped because a peer left (StoppedByPeer) is not the cause: then the
        reason names the rank that left, in spmd's words (its supervisor may still stand in
        for it), with the error it recorded."""
        failed = {r: s for r, s in self.statuses.items() if s.failed and r not in stopped}
        causes = {r: s for r, s in failed.items()
                  if not (s.error or "").startswith(STOPPED_BY_PEER)}
        if causes or not failed or reason:
            failed = causes or failed
            return (min(failed, key=lambda r: failed[r].failed_at) if failed else None,
                    reason, code)
        early = left_early(self.statuses, self.config.rank_status)
        reason = (early_exit_reason(early[0], self.statuses[early[0]], sorted(failed))
                  if early else self._told_by_spmd())
        return None, reason, 1 if code is None else code

    def _collect_stacks(self, running: list[int]) -> dict:
        """Ask each running rank for its Python stack (faulthandler, see spmd/run.py)."""
        from spmd.run import STACK_SIGNAL, stack_path

        for rank in running:
            kill(self.statuses[rank].pid, STACK_SIGNAL)
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
                if (text and text == seen.get(rank)) or not alive(self.statuses[rank].pid):
                    stacks[rank] = text
                seen[rank] = text
        return stacks

    def _stop(self, running: list[int]) -> None:
        """SIGTERM every local worker and the process manager, SIGKILL what is left."""
        pids = [p for r in running
                for p in (self.statuses[r].pid, self.statuses[r].supervisor_pid) if p]

        def send(sig: int) -> None:
            for pid in pids:
                kill(pid, sig)
            if self.proc.poll() is None:
                self.proc.send_signal(sig)

        escalate(send, lambda: self.proc.poll() is None or any(alive(p) for p in pids))
