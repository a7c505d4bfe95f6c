"""Trainers started without a launcher, with fluid's PADDLE_* variables only (one plain process
per trainer, as fluid's launcher, Kubernetes pods and Paddle's test harness start them), join one
world at trainer 0's endpoint (spmd/comm/join.py): results equal mpiexec's, the join point turns
strangers away while the job waits, and a trainer that ends before the job starts fails it at
once, naming that trainer. Every process ends (the `token` fixture checks none is left).
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import time

import pytest
from launch_helpers import MPIEXEC, PYTHON, ROOT, SCRIPTS, base_env, run

from spmd.comm import join_point as jp

SCRIPT = str(SCRIPTS / "env_only_train.py")
BOUND_S = 120


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Trainers:
    """N plain processes, trainer i with PADDLE_TRAINER_ID=i and the job's endpoints."""

    def __init__(self, n: int, args: list[str], token: str, **env: str):
        self.endpoints = [f"127.0.0.1:{p}" for p in free_ports(n)]
        self.n, self.args, self.token, self.env = n, args, token, env
        self.procs: dict[int, subprocess.Popen] = {}

    def start(self, trainer: int, **env: str) -> None:
        variables = base_env(self.token, PADDLE_TRAINER_ID=str(trainer),
                             PADDLE_TRAINERS_NUM=str(self.n),
                             PADDLE_TRAINER_ENDPOINTS=",".join(self.endpoints),
                             PADDLE_CURRENT_ENDPOINT=self.endpoints[trainer], **self.env, **env)
        self.procs[trainer] = subprocess.Popen(
            [PYTHON, SCRIPT, *self.args], cwd=ROOT, env=variables, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)

    def start_all(self) -> Trainers:
        for trainer in range(self.n):
            self.start(trainer)
        return self

    def wait(self) -> dict[int, tuple[int, str]]:
        """trainer -> (exit code, stdout + stderr); every trainer ended within BOUND_S."""
        deadline = time.monotonic() + BOUND_S
        results = {}
        for trainer, proc in sorted(self.procs.items()):
            try:
                out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for p in self.procs.values():
                    p.kill()
                raise AssertionError(
                    f"trainer {trainer} still running after {BOUND_S} s") from None
            results[trainer] = (proc.returncode, out + err)
        return results

    @property
    def root(self) -> tuple[str, int]:
        host, port = self.endpoints[0].rsplit(":", 1)
        return host, int(port)


def results_lines(text: str) -> list[str]:
    # found anywhere, not per line: mpiexec's merged output may join two ranks' lines
    return sorted(re.findall(r"rank \d+/\d+ (?:step \d+ loss|checksum) -?\d+\.\d{6}", text))


def mpiexec_lines(n: int, args: list[str], token: str) -> list[str]:
    res = run([MPIEXEC, "-n", str(n), PYTHON, SCRIPT, *args], token, timeout=BOUND_S)
    assert res.returncode == 0, res.output[-3000:]
    return results_lines(res.stdout)


@pytest.mark.parametrize("n, mode", [(2, "allreduce"), (3, "reduce")])
def test_env_only_trainers_train_what_mpiexec_trains(n, mode, token, tmp_path):
    args = ["--ckpt", str(tmp_path / "ckpt")] + (["--reduce"] if mode == "reduce" else [])
    results = Trainers(n, args, token, SPMD_JOB_TOKEN="a shared secret").start_all().wait()
    for trainer, (code, text) in results.items():
        assert code == 0, f"trainer {trainer}:\n{text[-3000:]}"
        assert f"rank {trainer}/{n} checksum" in text  # rank = trainer id
    env_only = sorted(line for _, text in results.values() for line in results_lines(text))
    assert env_only == mpiexec_lines(n, ["--ckpt", str(tmp_path / "ckpt2")] + args[2:], token)
    checksums = {line.split()[-1] for line in env_only if "checksum" in line}
    assert len(checksums) == 1  # the same parameters on every trainer


def _send(address, data: bytes, hold_s: float = 0.0) -> None:
    with socket.create_connection(address, timeout=5) as sock:
        if data:
            sock.recv(jp.NONCE)
            sock.sendall(data)
        time.sleep(hold_s)


def test_join_point_refuses_strangers_and_the_job_goes_on(token):
    trainers = Trainers(2, [], token, SPMD_JOB_TOKEN="this job's secret")
    trainers.start(0)
    address = trainers.root
    deadline = time.monotonic() + 60
    while True:  # trainer 0's join point opens once it reaches its first MPI use
        try:
            socket.create_connection(address, timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "trainer 0 never opened its join point"
            time.sleep(0.2)
    garbage = os.urandom(jp.HELLO + 40)
    other_key, _ = jp.job_key({"SPMD_JOB_TOKEN": "another job's secret"})
    with socket.create_connection(address, timeout=5) as sock:  # another job's own hello
        hello, _ = jp.pack_hello(other_key, sock.recv(jp.NONCE), 1, 2, jp.HERE)
        sock.sendall(hello)
        assert sock.recv(100) == b""  # turned away: closed, no answer
    _send(address, garbage)
    _send(address, garbage[:10], hold_s=4.0)  # a truncated hello, held open
    trainers.start(1)
    results = trainers.wait()
    for trainer, (code, text) in results.items():
        assert code == 0, f"trainer {trainer}:\n{text[-3000:]}"
    log = results[0][1]
    assert log.count("refused a connection") >= 4, log[-3000:]
    assert "not this job's hello" in log and "no whole hello within" in log
    lines = sorted(line for _, text in results.values() for line in results_lines(text))
    assert lines == mpiexec_lines(2, [], token)


@pytest.mark.parametrize("fault", ["raise", "exit0", "os_exit0"])
def test_a_trainer_that_ends_before_the_job_starts_fails_it_at_once(fault, token):
    results = Trainers(2, ["--fault", fault], token).start_all().wait()
    code0, text0 = results[0]
    code1, text1 = results[1]
    assert code0 != 0 and code1 != 0, text0[-2000:] + text1[-2000:]
    assert "stopped: trainer 1 ended before the job started" in text0, text0[-2000:]
    assert "[rank 1/2] FAILED" in text1, text1[-2000:]
    if fault == "raise":
        assert "FileNotFoundError: trainer 1: no data file here" in text0 + text1


def test_trainer_zero_that_ends_early_is_named_to_the_others(token):
    results = Trainers(3, ["--fault", "raise", "--who", "0"], token).start_all().wait()
    assert all(code != 0 for code, _ in results.values())
    for trainer in (1, 2):
        text = results[trainer][1]
        assert "stopped: trainer 0 ended before the job started: FileNotFoundError" in text, \
            text[-2000:]


def test_no_trainer_zero_is_named_by_the_others_timeout(token):
    trainers = Trainers(2, [], token, SPMD_JOIN_TIMEOUT="4")
    trainers.start(1)
    code, text = trainers.wait()[1]
    assert code != 0
    assert "trainer 0's join point" in text and "did not answer within 4 s" in text, text[-2000:]


def test_join_timeout_names_the_trainers_that_never_came(token):
    trainers = Trainers(3, [], token, SPMD_JOIN_TIMEOUT="5")
    trainers.start(0)
    trainers.start(1)
    results = trainers.wait()
    assert results[0][0] != 0 and results[1][0] != 0
    assert "trainer(s) 2 (127.0.0.1:" in results[0][1], results[0][1][-2000:]
    assert "never reached trainer 0's join point" in results[1][1], results[1][1][-2000:]
