"""Crash tests, in the style of mpi4py's own run tests: one rank raises, is killed, or hangs,
and the whole job ends with a non-zero exit (each run bounded: one still running after
DEADLINE_S fails its test) and a report naming the rank; no
process is left behind (the `token` fixture checks). Also plain `mpiexec` without the launcher:
a rank that raises still ends the job."""
from __future__ import annotations

import re
import signal
import subprocess
import time

import pytest
from launch_helpers import MPIEXEC, PYTHON, ROOT, SCRIPTS, base_env, launcher, run

CRASH = str(SCRIPTS / "crash.py")
DEADLINE_S = 60  # the bound of every run here: a job still running then fails its test


def launch_crash(tmp_path, token, nproc, *script_args, flags=()):
    res = run(launcher("--nproc_per_node", str(nproc), "--log_dir", str(tmp_path / "log"),
                       *flags, CRASH, *script_args, "--token", token),
              token, timeout=DEADLINE_S)
    return res


def report(res) -> str:
    """The failure report (stderr, from its header on)."""
    start = res.stderr.find("paddle-launch: the job failed")
    assert start >= 0, res.output[-4000:]
    return res.stderr[start:]


def test_success_prints_config_once_and_rank_0_on_the_console(tmp_path, token):
    res = launch_crash(tmp_path, token, 2, "--mode", "ok", "--steps", "3")
    assert res.returncode == 0, res.output[-3000:]
    assert res.stdout.count("paddle-launch configuration:") == 1
    assert "rank 0/2 done" in res.stdout and "rank 1/2" not in res.stdout
    for rank in range(2):
        log = (tmp_path / "log" / f"workerlog.{rank}").read_text()
        assert f"rank {rank}/2 step 2 loss" in log and f"rank {rank}/2 done" in log


@pytest.mark.parametrize("nproc, rank", [(2, 0), (3, -1)], ids=["rank0", "last-rank"])
def test_raise(tmp_path, token, nproc, rank):
    res = launch_crash(tmp_path, token, nproc, "--mode", "raise", "--rank", str(rank))
    bad = rank % nproc
    assert res.returncode == 1, res.output[-3000:]
    text = report(res)
    assert text.startswith(f"paddle-launch: the job failed: rank {bad} on ")
    assert f"rank {bad} on" in text and "[root cause] exit code 1: ZeroDivisionError" in text
    assert f"{tmp_path}/log/workerlog.{bad}, last" in text
    assert f"rank {bad} failed on purpose at step 2" in text  # the log's tail
    for other in set(range(nproc)) - {bad}:
        assert re.search(rf"rank {other} on \S+: stopped by the launcher", text), text


def test_sigkill_one_rank_mid_training(tmp_path, token):
    res = launch_crash(tmp_path, token, 3, "--mode", "kill", "--rank", "1")
    assert res.returncode == 128 + signal.SIGKILL, res.output[-3000:]
    text = report(res)
    assert re.search(r"rank 1 on \S+: \[root cause\] killed by SIGKILL", text), text
    assert "rank 1/3 step 1 loss" in text  # mid-training: its log's tail
    for other in (0, 2):  # asked where they were, then stopped
        assert re.search(rf"rank {other} on \S+: stopped by the launcher\n +(was )?waiting in "
                         rf"allreduce", text), text


def test_hang_ends_by_collective_timeout_with_ops_and_stacks(tmp_path, token):
    res = launch_crash(tmp_path, token, 3, "--mode", "hang", "--rank", "1", "--step", "1",
                       flags=("--collective_timeout", "2"))
    assert res.returncode == 1, res.output[-3000:]
    text = report(res)
    root = int(re.search(r"rank (\d+) on \S+: \[root cause\]", text).group(1))
    assert root in (0, 2), text
    assert "CommunicationError" in text and "allreduce did not complete within 2 s" in text
    # every rank: the op it waited in, or its stack
    assert len(re.findall(r"waiting in allreduce", text)) == 2, text
    assert re.search(r"rank 1 on \S+: stopped by the launcher\n +not in a collective; its "
                     r"Python stack", text), text
    assert "crash.py\", line" in text.split("rank 1 on", 1)[1]
    assert "rank(s) 1 never entered it" in text


def test_mpi_abort_in_a_rank(tmp_path, token):
    # MPI_Abort makes the process manager end the job itself; the report points at the rank
    # from its log, as no worker lived to record anything.
    res = launch_crash(tmp_path, token, 3, "--mode", "abort", "--rank", "1")
    assert res.returncode != 0, res.output[-3000:]
    text = report(res)
    assert "the process manager exited with code" in text
    assert "rank 1's log" in text and "it called MPI_Abort: the likely root cause" in text


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_the_launcher_stops_every_worker(tmp_path, token, sig):
    log_dir = tmp_path / "log"
    proc = subprocess.Popen(
        launcher("--nproc_per_node", "2", "--log_dir", str(log_dir), CRASH, "--mode", "hang",
                 "--rank", "1", "--step", "1", "--token", token),
        cwd=ROOT, env=base_env(token), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # training: rank 0 waits for the sleeping rank 1
            status = (log_dir / "workerstatus.0")
            if status.exists() and " wait " in status.read_text():
                break
            time.sleep(0.1)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=DEADLINE_S)  # a bound for a hang, not a timing
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + sig, out + err
    name = signal.Signals(sig).name
    assert f"paddle-launch: the job failed: paddle-launch got {name}" in err, err
    assert re.search(r"rank 0 on \S+: stopped by the launcher\n +was waiting in allreduce",
                     err), err
    assert "in main" in err.split("rank 1 on", 1)[1]  # its stack


def test_plain_mpiexec_rank_that_raises_ends_the_job(token):
    # No launcher, no spmd.run: spmd's MPI initialization makes an uncaught exception abort.
    res = run([MPIEXEC, "-n", "4", PYTHON, CRASH, "--mode", "raise", "--rank", "-1",
               "--token", token], token, timeout=60)
    assert res.returncode != 0, res.output[-3000:]
    assert "ZeroDivisionError: rank 3 failed on purpose" in res.output


def test_mpiexec_with_spmd_run_ends_the_job(token):
    res = run([MPIEXEC, "-n", "2", PYTHON, "-m", "spmd.run", CRASH, "--mode", "raise",
               "--rank", "0", "--token", token], token, timeout=60)
    assert res.returncode != 0, res.output[-3000:]
    assert "ZeroDivisionError: rank 0 failed on purpose" in res.output
    assert "spmd/run.py" not in res.output  # the script's own traceback


def test_launcher_under_mpiexec_becomes_the_worker(token):
    res = run([MPIEXEC, "-n", "2", PYTHON, "-m", "launch", CRASH, "--mode", "ok", "--steps",
               "2", "--token", token], token, timeout=60)
    assert res.returncode == 0, res.output[-3000:]
    assert res.stdout.count("scheduler          : mpi") == 1  # printed by rank 0 only
    assert "rank 0/2 done" in res.stdout and "rank 1/2 done" in res.stdout


def test_no_proxy_reaches_the_workers(tmp_path, token):
    script = tmp_path / "env.py"
    script.write_text("import os\nprint('PROXY', os.environ.get('http_proxy'), "
                      "os.environ.get('https_proxy'), os.environ['PADDLE_TRAINER_ID'])\n")
    res = run(launcher("--nproc_per_node", "2", "--log_dir", str(tmp_path / "log"),
                       str(script)), token, timeout=60, http_proxy="http://p:1",
              https_proxy="http://p:2")
    assert res.returncode == 0, res.output
    for rank in range(2):
        log = (tmp_path / "log" / f"workerlog.{rank}").read_text()
        assert f"PROXY None None {rank}" in log, log
