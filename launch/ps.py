"""A parameter-server job on this machine: `paddle-launch --server_num N --worker_num M
script.py` starts N pservers and M trainers as fluid 1.8's `launch_ps` did (each its own
process, `python -u script.py`, the PADDLE_* variables of launch.env.ps_role_env; pservers on
free ports of 127.0.0.1 unless --started_port), each with its log: log_dir/serverlog.N and
log_dir/workerlog.N (trainer 0's also on this console).

It waits for the trainers. When they all succeeded it gives the pservers a moment to end by
themselves (spmd's pserver ends once every trainer called exe.close(); fluid's never did), then
stops them. When any process fails (a trainer, or a pserver that ends with an error) it stops
every other one and reports the role and rank that failed first, its exit code or signal and
the end of its log. Each process leads its own process group, and dies with the launcher
(PR_SET_PDEATHSIG), so nothing outlives the job.
"""
from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

from .config import LaunchConfig
from .env import PSERVER, TOKEN_ENV, TRAINER, fresh_token, ps_role_env, without_proxies
from .report import signal_name, tail
from .scheduler import free_ports
from .supervisor import TERM_WAIT_S, Supervisor, die_with_launcher, escalate, killpg

SERVER_GRACE_S = 10.0  # after the last trainer, how long the pservers get to end by themselves


@dataclass
class _Proc:
    role: str
    index: int
    log: str
    popen: subprocess.Popen
    stopped: bool = False

    @property
    def name(self) -> str:
        return f"{'pserver' if self.role == PSERVER else 'trainer'} {self.index}"

    def how(self) -> str:
        rc = self.popen.returncode
        if rc is None:
            return "running"
        return f"killed by {signal_name(-rc)}" if rc < 0 else f"exit code {rc}"


def format_ps_config(config: LaunchConfig) -> str:
    rows = [
        ("mode", "parameter server (fluid's launch_ps)"),
        ("training script", " ".join([config.training_script, *config.training_script_args])),
        ("pservers", f"{config.server_num}: {','.join(config.pserver_endpoints)}"),
        ("trainers", str(config.worker_num)),
        ("log_dir", f"{config.log_dir} (serverlog.N, workerlog.N; trainer 0 also on this "
                    f"console)"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(["paddle-launch configuration:"]
                     + [f"  {k:<{width}} : {v}" for k, v in rows])


def role_envs(config: LaunchConfig, base_env) -> list[tuple[str, int, dict]]:
    """(role, index, environment) of every process of the job, pservers first."""
    servers = config.pserver_endpoints
    # fluid's trainers had endpoints of their own (fleet's role maker reads them); spmd's
    # listen on nothing, so these are only free ports, as fluid's were
    trainers = [f"{config.node_ip}:{p}" for p in free_ports(config.worker_num, "127.0.0.1")]
    common = dict(without_proxies(base_env), PYTHONUNBUFFERED="1")
    # the pservers admit only this job's trainers (spmd/ps/rpc.py)
    common[TOKEN_ENV] = base_env.get(TOKEN_ENV) or fresh_token()
    if "OMP_NUM_THREADS" not in base_env:
        common["OMP_NUM_THREADS"] = "1"
    for name in ("PADDLE_TRAINER_ID", "PADDLE_CURRENT_ENDPOINT", "PADDLE_PORT", "POD_IP",
                 "SPMD_STATUS_FILE", "SPMD_WORKER_LOG"):
        common.pop(name, None)
    out = []
    for role, count in ((PSERVER, config.server_num), (TRAINER, config.worker_num)):
        for i in range(count):
            env = ps_role_env(role, i, servers, config.worker_num, trainers)
            out.append((role, i, {**common, **env}))
    return out


class PSJob(Supervisor):
    """A parameter-server job on this machine: every pserver and trainer a process of its
    own, each leading its process group."""

    def __init__(self, config: LaunchConfig):
        super().__init__(config.log_dir, config.role_log(TRAINER, 0))
        self.config = config
        self.procs: list[_Proc] = []
        self.done_at: float | None = None

    def start(self) -> None:
        os.makedirs(self.config.log_dir, exist_ok=True)
        self.remove_report()
        for role, index, env in role_envs(self.config, os.environ):
            self._start(role, index, env)

    def _start(self, role: str, index: int, env: dict) -> None:
        log = self.config.role_log(role, index)
        cmd = [self.config.python, "-u", self.config.training_script,
               *self.config.training_script_args]
        with open(log, "wb") as out:
            popen = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=die_with_launcher)
        self.procs.append(_Proc(role, index, log, popen))

    def poll(self) -> int | None:
        failed = [p for p in self.procs if p.popen.poll() not in (None, 0)]
        if failed:
            return self._fail(failed[0], "")
        trainers = [p for p in self.procs if p.role == TRAINER]
        servers = [p for p in self.procs if p.role == PSERVER]
        if all(p.popen.poll() == 0 for p in trainers):
            self.done_at = self.done_at or time.monotonic()
            if all(p.popen.poll() is not None for p in servers) or \
                    time.monotonic() - self.done_at > SERVER_GRACE_S:
                self.console.pump()
                return 0  # close() stops the pservers still serving
        return None

    def fail_for_signal(self, reason: str, code: int) -> int:
        return self._fail(None, reason, code)

    def close(self) -> None:
        self._stop([p for p in self.procs if p.popen.poll() is None])

    def _stop(self, procs: list[_Proc]) -> None:
        """SIGTERM the process group of each, then SIGKILL what is left."""
        def send(sig: int) -> None:
            for p in procs:
                if p.popen.poll() is None:
                    p.stopped = True
                killpg(p.popen.pid, sig)

        escalate(send, lambda: any(p.popen.poll() is None for p in procs))
        for p in procs:
            try:
                p.popen.wait(TERM_WAIT_S)
            except subprocess.TimeoutExpired:
                pass

    def _fail(self, root: _Proc | None, reason: str, code: int | None = None) -> int:
        self._stop([p for p in self.procs if p.popen.poll() is None])
        self.write_report(format_ps_report(self.procs, root, reason, self.config.log_dir))
        if code is not None:
            return code
        rc = root.popen.returncode
        return 128 - rc if rc < 0 else rc


def format_ps_report(procs: list[_Proc], root: _Proc | None, reason: str,
                     log_dir: str) -> str:
    """Which role and rank failed first, how, the end of its log; then every process."""
    if root is not None:
        head = (f"paddle-launch: the parameter-server job failed: {root.name} "
                f"(PADDLE_TRAINING_ROLE={root.role}, rank {root.index}), {root.how()}")
    else:
        head = f"paddle-launch: the parameter-server job failed: {reason}"
    lines = [head, f"  every process was stopped; each one's output is in {log_dir}/"
                   f"serverlog.N and workerlog.N"]
    for p in sorted(procs, key=lambda p: p is not root):
        if p is root:
            label = "[root cause] " + p.how()
        elif p.stopped:
            label = "stopped by the launcher"
        else:
            label = p.how() + (" (after the root cause)" if root is not None and
                               p.popen.returncode not in (0, None) else "")
        lines.append(f"  {p.name}: {label}")
        if p is root:
            last = tail(p.log)
            lines.append(f"    log {p.log}, last {len(last)} line(s):")
            lines += [f"      | {line}" for line in last]
        elif p.popen.returncode not in (0, None) and not p.stopped:
            lines.append(f"    log {p.log}")
    return "\n".join(lines)
