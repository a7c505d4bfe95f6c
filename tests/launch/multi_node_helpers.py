"""Helpers for the tests on two emulated nodes (netns.py): paddle-launch on each node, the
one-node reference run, the `rank r/n trained: ...` lines, and connections that are not this
job's (garbage, a truncated hello, another job's token) sent to a listening socket."""
from __future__ import annotations

import re
import subprocess
import time

from launch_helpers import MPIEXEC, PYTHON, ROOT, base_env, run

TRAIN = "examples/slurm/train.py"


def launch_cmd(nodes, node, log_dir, *args: str, join_timeout: float = 60) -> list[str]:
    return [PYTHON, "-m", "launch", "--cluster_node_ips", ",".join(n.ip for n in nodes),
            "--node_ip", node.ip, "--nproc_per_node", "2", "--join_timeout", f"{join_timeout:g}",
            "--log_dir", str(log_dir), *args]


def start(node, cmd: list[str], token: str, **extra) -> subprocess.Popen:
    return node.popen(cmd, base_env(token, **extra), cwd=ROOT, text=True,
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                      stdin=subprocess.DEVNULL)


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"still running after {timeout} s:\n{out[-4000:]}") from None
    return proc.returncode, out


# The patterns name the whole line's form, not `.*`: mpiexec forwards each rank's output as it
# reads it, so another rank's line can land before this line's newline.
NUMBER = r"-?\d+\.\d+(?:e[-+]\d+)?|nan|inf"
TRAINED = r"rank {rank}/{size} trained: loss (?:NUM) -> (?:NUM)".replace("NUM", NUMBER)
LAST_STEP = (r"rank {rank}/{size} step \d+ loss (?:NUM)(?![\s\S]*rank {rank}/{size} step)"
             .replace("NUM", NUMBER))


def results(log_dir, size: int, pattern: str = TRAINED) -> dict:
    """rank -> its result line (`pattern`), from the workers' logs."""
    found = {}
    for rank in range(size):
        text = (log_dir / f"workerlog.{rank}").read_text()
        match = re.search(pattern.format(rank=rank, size=size), text)
        assert match, f"rank {rank} has no result:\n{text[-3000:]}"
        found[rank] = match.group()
    return found


_reference: dict = {}


def one_node_reference(script: list[str], token: str, pattern: str = TRAINED) -> dict:
    """rank -> result line of `mpiexec -n 4 python -m spmd.run script` on one node (made
    once per session and script)."""
    key = (tuple(script), pattern)
    if key not in _reference:
        res = run([MPIEXEC, "-n", "4", PYTHON, "-m", "spmd.run", *script], token, timeout=180)
        assert res.returncode == 0, res.output[-3000:]
        found = {}
        for rank in range(4):
            match = re.search(pattern.format(rank=rank, size=4), res.stdout)
            assert match, res.stdout[-3000:]
            found[rank] = match.group()
        _reference[key] = found
    return _reference[key]


def listening_port(node, pid: int | None = None, port: int | None = None,
                   deadline_s: float = 60) -> int:
    """The TCP port process `pid` (or anyone, on `port`) listens on in `node`; waits."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        out = subprocess.run(["ip", "netns", "exec", node.ns, "ss", "-Hltnp"],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            found = int(line.split()[3].rsplit(":", 1)[1])
            if (pid is None or f"pid={pid}," in line) and port in (None, found):
                return found
        time.sleep(0.1)
    raise AssertionError(f"nothing listens in {node.host} (pid {pid}, port {port})")


INTRUDER = r"""
import socket, sys, time
sys.path.insert(0, {root!r})
from spmd.job_token import HELLO_LEN, hello
host, port = sys.argv[1], int(sys.argv[2])
tries = [b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)),             # garbage
         hello("another job", {purpose!r})[:HELLO_LEN // 2],       # a truncated hello
         hello("another job", {purpose!r}) + b"hello 1\n{{}}\n"]   # another job's token
for data in tries:
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(data)
    s.settimeout(8)
    try:  # refused: closed without a word (a reset, where it had not read all we sent)
        got = s.recv(1024)
        verdict = "refused" if got == b"" else f"answered {{got!r}}"
    except ConnectionResetError:
        verdict = "refused"
    except OSError as e:
        verdict = f"kept open ({{e!r}})"
    print(verdict, flush=True)
    s.close()
"""


def intrude(node, host: str, port: int, purpose: str, token: str) -> str:
    """From `node`: connect to host:port three times with what is not this job's hello; what
    came of each ("refused": the listener closed the connection without a word)."""
    code = INTRUDER.format(root=str(ROOT), purpose=purpose)
    res = node.run([PYTHON, "-c", code, host, str(port)], base_env(token), timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout
