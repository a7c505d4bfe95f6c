"""Parameter-server mode under the launcher: `paddle-launch --server_num 2 --worker_num 2`
and `mpiexec -n 4 paddle-launch --server_num 2` (the first 2 ranks serve) run
tests/unit/ps_scripts/ps_role.py's sync SGD job (through scripts/ps_launch_role.py, which names
each role's output by its role and rank) equal to one process; a trainer that fails makes the
launcher stop the pservers and name it. Every run is bounded and the `token` fixture checks
that no process outlives its test. Also the environment contract (launch.env) in one process.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from launch_helpers import MPIEXEC, PYTHON, ROOT, SCRIPTS, base_env, launcher, run

from launch.env import PSERVER, TRAINER, ps_mpi_env, ps_role_env
from spmd.ps.role import read_ps_role  # the worker's reading of what launch.env writes

pytest.importorskip("grpc")

sys.path.insert(0, str(ROOT / "tests" / "unit" / "ps_scripts"))
import ps_role  # noqa: E402

SCRIPT = str(SCRIPTS / "ps_launch_role.py")
DEADLINE_S = 90
ARGS = ["--model", "mixed", "--opt", "sgd", "--steps", "3", "--init-seed", "3"]
PARAMS = tuple(ps_role.SHAPES)
PS_ENV = {"SPMD_PS_RPC_DEADLINE": "30", "SPMD_PS_IDLE_TIMEOUT": "45"}


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def assemble(*parts: dict) -> dict:
    """Whole variables from the pservers' blocks (name.blockN joined in order)."""
    blocks: dict = {}
    for values in parts:
        for name, value in values.items():
            m = re.match(r"^(.*)\.block(\d+)$", name)
            base, index = (m.group(1), int(m.group(2))) if m else (name, -1)
            blocks.setdefault(base, {})[index] = value
    return {n: d[-1] if -1 in d else np.concatenate([d[i] for i in sorted(d)])
            for n, d in blocks.items()}


def check_equals_one_process(tmp_path, out: str) -> None:
    roles = {r: dict(np.load(f"{out}.{r}.npz")) for r in ("ps0", "ps1", "t0", "t1")}
    init = assemble(dict(np.load(f"{out}.ps0.npz.init.npz")),
                    dict(np.load(f"{out}.ps1.npz.init.npz")))
    np.savez(tmp_path / "init.npz", **{n: init[n] for n in PARAMS})
    subprocess.run([PYTHON, str(ROOT / "tests" / "unit" / "ps_scripts" / "ps_role.py"),
                    "--out", str(tmp_path / "local.npz"), "--init", str(tmp_path / "init.npz"),
                    *ARGS[:-2]], check=True, timeout=DEADLINE_S,
                   env=dict(os.environ, PADDLE_TRAINING_ROLE="LOCAL", OMP_NUM_THREADS="1"))
    local = dict(np.load(tmp_path / "local.npz"))
    final = assemble(roles["ps0"], roles["ps1"])
    for name in PARAMS:
        assert np.abs(local[name] - init[name]).max() > 1e-3, f"{name} did not train"
        np.testing.assert_allclose(final[name], local[name], rtol=1e-4, atol=2e-5,
                                   err_msg=f"pservers' {name} vs one process")
    np.testing.assert_allclose((roles["t0"]["losses"] + roles["t1"]["losses"]) / 2,
                               local["losses"], rtol=1e-5)


@pytest.mark.timeout(3 * DEADLINE_S)
def test_launch_2_servers_2_workers_equals_one_process(tmp_path, token):
    log = tmp_path / "log"
    out = str(tmp_path / "run")
    res = run(launcher("--server_num", "2", "--worker_num", "2", "--log_dir", str(log),
                       SCRIPT, *ARGS, "--out", out), token, timeout=DEADLINE_S, **PS_ENV)
    assert res.returncode == 0, res.output[-4000:]
    assert "parameter server" in res.stdout and res.stdout.count("configuration:") == 1
    assert sorted(os.listdir(log)) == ["serverlog.0", "serverlog.1", "workerlog.0",
                                       "workerlog.1"]
    check_equals_one_process(tmp_path, out)


@pytest.mark.timeout(3 * DEADLINE_S)
def test_mpiexec_first_ranks_serve(tmp_path, token):
    endpoints = ",".join(f"127.0.0.1:{p}" for p in _free_ports(2))
    out = str(tmp_path / "mpi")
    res = run([MPIEXEC, "-n", "4", PYTHON, "-m", "launch", "--server_num", "2", SCRIPT, *ARGS,
               "--out", out], token, timeout=DEADLINE_S,
              PADDLE_PSERVERS_IP_PORT_LIST=endpoints, **PS_ENV)
    assert res.returncode == 0, res.output[-4000:]
    assert "ranks 0-1 pservers, ranks 2-3 trainers" in res.stdout, res.stdout[-2000:]
    check_equals_one_process(tmp_path, out)


@pytest.mark.timeout(2 * DEADLINE_S)
def test_failing_worker_stops_servers_and_is_named(tmp_path, token):
    log = tmp_path / "log"
    res = run(launcher("--server_num", "2", "--worker_num", "2", "--log_dir", str(log),
                       SCRIPT, *ARGS, "--out", str(tmp_path / "f")), token,
              timeout=DEADLINE_S, PS_FAIL_TRAINER="1", **PS_ENV)
    assert res.returncode == 3, res.output[-4000:]
    report = res.stderr[res.stderr.find("paddle-launch: the parameter-server job failed"):]
    assert report.startswith("paddle-launch: the parameter-server job failed: trainer 1 "
                             "(PADDLE_TRAINING_ROLE=TRAINER, rank 1), exit code 3"), res.stderr
    assert "failing on purpose" in report and str(log / "workerlog.1") in report
    for i in (0, 1):  # the pservers never end by themselves here: the launcher stopped them
        assert f"pserver {i}: stopped by the launcher" in report
    assert (log / "failure_report.txt").read_text().strip() == report.strip()
    # the fixture checks that no process is left


@pytest.mark.timeout(2 * DEADLINE_S)
def test_failing_server_is_named(tmp_path, token):
    res = run(launcher("--server_num", "2", "--worker_num", "2", "--log_dir",
                       str(tmp_path / "log"), SCRIPT, *ARGS, "--out", str(tmp_path / "f")),
              token, timeout=DEADLINE_S, PS_FAIL_SERVER="1", **PS_ENV)
    assert res.returncode == 3, res.output[-4000:]
    assert ("the parameter-server job failed: pserver 1 (PADDLE_TRAINING_ROLE=PSERVER, rank 1), "
            "exit code 3") in res.stderr, res.stderr
    assert str(tmp_path / "log" / "serverlog.1") in res.stderr


@pytest.mark.timeout(2 * DEADLINE_S)
def test_mpiexec_failing_trainer_ends_the_job(tmp_path, token):
    res = run([MPIEXEC, "-n", "4", PYTHON, "-m", "launch", "--print_config", "false",
               "--server_num", "2", SCRIPT, *ARGS, "--out", str(tmp_path / "f")], token,
              timeout=DEADLINE_S, PS_FAIL_TRAINER="0", PADDLE_PORT=str(_port_pair()), **PS_ENV)
    assert res.returncode != 0, res.output[-4000:]
    assert "trainer 0: failing on purpose" in res.output
    assert ("[rank 2/4] trainer 0 (PADDLE_TRAINING_ROLE=TRAINER) failed, exit code 3: ending "
            "the job") in res.stderr, res.output[-4000:]
    # ended by the failure, not by a timeout: no pserver went idle, no barrier gave up waiting
    # (how soon it ended, res.seconds, is a figure, not a pass condition)
    for waited in ("no call from any trainer", "did not arrive", "TimeoutError"):
        assert waited not in res.output, res.output[-4000:]
    # the pservers, which would serve forever, were ended with the job (the fixture checks)


@pytest.mark.timeout(DEADLINE_S)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_launcher_interrupted_or_killed_leaves_no_process(tmp_path, token, sig):
    log = tmp_path / "log"
    proc = subprocess.Popen(
        launcher("--server_num", "2", "--worker_num", "2", "--log_dir", str(log), SCRIPT, *ARGS,
                 "--out", str(tmp_path / "h")), cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env=base_env(token, PS_HANG_TRAINER="1", **PS_ENV))
    try:
        deadline = time.monotonic() + 30
        while "hanging on purpose" not in _read(log / "workerlog.1"):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if sig == signal.SIGINT:
        assert proc.returncode == 128 + sig, out + err
        assert "the parameter-server job failed: paddle-launch got SIGINT" in err, err
        assert "trainer 1: stopped by the launcher" in err, err
    # the fixture checks that every pserver and trainer ended with the launcher


def _read(path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def test_collective_options_are_refused_with_server_num(tmp_path):
    from launch.cli import parse
    from launch.config import UsageError

    script = tmp_path / "t.py"
    script.write_text("")
    with pytest.raises(UsageError, match="--nproc_per_node, --selected_gpus shape a collective "
                                         "job and cannot be combined with --server_num"):
        parse(["--server_num", "2", "--worker_num", "2", "--nproc_per_node", "4",
               "--selected_gpus", "0,1", str(script)], env={})
    assert parse(["--server_num", "2", "--worker_num", "2", str(script)], env={}).server_num == 2


def test_role_env_round_trips_through_the_contract():
    servers = ["127.0.0.1:7001", "127.0.0.1:7002"]
    for role, index in ((PSERVER, 1), (TRAINER, 0), (TRAINER, 2)):
        env = ps_role_env(role, index, servers, 3)
        got = read_ps_role(env)
        assert (got.role, got.index, got.trainers_num) == (role, index, 3)
        assert list(got.pserver_endpoints) == servers
    assert read_ps_role({}) is None
    # the seed example's older form: PADDLE_PSERVER_IPS and one PADDLE_PORT, POD_IP
    old = read_ps_role({"PADDLE_TRAINING_ROLE": "PSERVER", "PADDLE_PSERVER_IPS": "a,b",
                        "PADDLE_PORT": "6174", "POD_IP": "b", "PADDLE_TRAINERS_NUM": "2"})
    assert old.current_endpoint == "b:6174" and old.index == 1
    with pytest.raises(ValueError, match="PADDLE_TRAINER_ID=2"):
        read_ps_role(ps_role_env(TRAINER, 2, servers, 2))
    with pytest.raises(ValueError, match="not in the pservers' list"):
        read_ps_role(dict(ps_role_env(PSERVER, 0, servers, 2), PADDLE_CURRENT_ENDPOINT="x:1"))


def test_mpi_rank_mapping():
    roles = [read_ps_role(ps_mpi_env(r, 5, 2, {"PADDLE_PORT": "9000"})) for r in range(5)]
    assert [(r.role, r.index) for r in roles] == [
        (PSERVER, 0), (PSERVER, 1), (TRAINER, 0), (TRAINER, 1), (TRAINER, 2)]
    assert roles[1].current_endpoint == "127.0.0.1:9001"
    assert all(r.trainers_num == 3 for r in roles)
    listed = ps_mpi_env(0, 3, 2, {"PADDLE_PSERVERS_IP_PORT_LIST": "h1:1,h2:2"})
    assert listed["PADDLE_CURRENT_ENDPOINT"] == "h1:1"
    with pytest.raises(ValueError, match="lists 2 endpoint"):
        ps_mpi_env(0, 4, 3, {"PADDLE_PSERVERS_IP_PORT_LIST": "h1:1,h2:2"})
    with pytest.raises(ValueError, match="at least one rank must serve and one train"):
        ps_mpi_env(0, 2, 2, {})


def _port_pair() -> int:
    """A port p with p and p + 1 free now."""
    for _ in range(50):
        p = _free_ports(1)[0]
        if p < 65535 and _free_ports_at([p, p + 1]):
            return p
    raise AssertionError("no two consecutive free ports")


def _free_ports_at(ports: list[int]) -> bool:
    socks = []
    try:
        for p in ports:
            s = socket.socket()
            s.bind(("127.0.0.1", p))
            socks.append(s)
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


@pytest.mark.timeout(240)
def test_slurm_job_three_ways(tmp_path, token, tmp_path_factory):
    from slurm_cluster import skip_reason, slurm_cluster, tail

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    path = f"{os.path.dirname(PYTHON)}{os.pathsep}{os.environ.get('PATH', '')}"
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as cluster:
        out = tmp_path / "job.out"
        res = run(["sbatch", "--wait", "-n", "4", "--overcommit", "--output", str(out),
                   str(SCRIPTS / "ps_job.sbatch")], token, timeout=150, cwd=ROOT, PATH=path,
                  PYTHON=PYTHON, SCRIPT=SCRIPT, OUT=str(tmp_path), PORT0=str(_port_pair()),
                  PORT1=str(_port_pair()), **PS_ENV, **cluster.env)
        text = out.read_text() if out.exists() else "(no job output)"
        assert res.returncode == 0, f"{res.output}\n{text}\n{tail(cluster.dir / 'slurmd.log')}"
    assert "== done" in text, text
    assert text.count("ranks 0-1 pservers, ranks 2-3 trainers") == 2, text
    for form in ("pmi2", "srun", "local"):
        check_equals_one_process(tmp_path, str(tmp_path / form))
