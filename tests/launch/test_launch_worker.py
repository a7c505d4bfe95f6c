"""`python -m spmd.run`: the worker side of the contract (status file, supervisor, stack dump,
log) and the failure report built from it."""
from __future__ import annotations

import os
import signal
import subprocess
import time

from launch_helpers import PYTHON, ROOT, SCRIPTS, base_env, run

from launch.report import Outcome, clean_stack, format_report
from spmd.run import STACK_SIGNAL, stack_path
from spmd.status_file import WorkerStatus, append_event, read_status

SLEEPER = str(SCRIPTS / "sleeper.py")


def test_status_file_round_trip(tmp_path):
    path = str(tmp_path / "status")
    append_event(path, "start", "pid=11 supervisor=10 host=node1")
    append_event(path, "wait", "allreduce")
    append_event(path, "wait", "broadcast(root=0)")  # another thread
    append_event(path, "done", "allreduce")
    append_event(path, "error", "ValueError: bad\nvalue")  # one line, always
    append_event(path, "ended", "signal=9")
    status = read_status(path)
    assert (status.pid, status.supervisor_pid, status.host) == (11, 10, "node1")
    assert [op for op, _ in status.waiting] == ["broadcast(root=0)"]
    assert status.error == "ValueError: bad value"
    assert status.signal == 9 and status.failed and status.failed_at == status.error_time
    assert read_status(str(tmp_path / "missing")) == WorkerStatus()


def test_usage_errors(token):
    res = run([PYTHON, "-m", "spmd.run"], token, timeout=30)
    assert res.returncode == 2 and "usage: python -m spmd.run" in res.stderr
    res = run([PYTHON, "-m", "spmd.run", "nope.py"], token, timeout=30)
    assert res.returncode == 2 and "script 'nope.py' not found" in res.stderr


def test_runs_a_script_with_its_arguments(token):
    res = run([PYTHON, "-m", "spmd.run", SLEEPER, "--args", "x"], token, timeout=30)
    assert res.returncode == 0 and f"argv ['{SLEEPER}', '--args', 'x']" in res.stdout


def test_runs_a_module(token):
    res = run([PYTHON, "-m", "spmd.run", "-m", "json.tool", "--help"], token, timeout=30)
    assert res.returncode == 0 and "json.tool" in res.stdout


def test_error_exits_1_with_the_scripts_traceback(token):
    res = run([PYTHON, "-m", "spmd.run", SLEEPER, "--raise"], token, timeout=30)
    assert res.returncode == 1
    assert "ValueError: bad value" in res.stderr and "sleeper.py" in res.stderr
    assert "spmd/run.py" not in res.stderr and "runpy" not in res.stderr, res.stderr


def test_sys_exit_code_is_kept(token):
    assert run([PYTHON, "-m", "spmd.run", SLEEPER, "--exit", "3"], token).returncode == 3
    assert run([PYTHON, "-m", "spmd.run", SLEEPER, "--exit", "0"], token).returncode == 0


def _worker_env(tmp_path, token):
    return base_env(token, SPMD_STATUS_FILE=str(tmp_path / "status"),
                    SPMD_WORKER_LOG=str(tmp_path / "log"))


def test_supervisor_records_the_exit_code(tmp_path, token):
    proc = subprocess.run([PYTHON, "-m", "spmd.run", SLEEPER, "--raise"], cwd=ROOT,
                          env=_worker_env(tmp_path, token), capture_output=True, timeout=30)
    assert proc.returncode == 1 and proc.stdout == b""  # the output went to the log
    status = read_status(str(tmp_path / "status"))
    assert status.exit_code == 1 and status.error == "ValueError: bad value"  # its first line
    assert status.pid != status.supervisor_pid
    assert "ValueError: bad value" in (tmp_path / "log").read_text()


def test_supervisor_sees_a_sigkill(tmp_path, token):
    proc = subprocess.run([PYTHON, "-m", "spmd.run", SLEEPER, "--kill"], cwd=ROOT,
                          env=_worker_env(tmp_path, token), capture_output=True, timeout=30)
    assert proc.returncode == 128 + signal.SIGKILL  # as a shell reports it
    status = read_status(str(tmp_path / "status"))
    assert status.signal == signal.SIGKILL and status.error is None


def test_stack_dump_on_the_stack_signal(tmp_path, token):
    proc = subprocess.Popen([PYTHON, "-m", "spmd.run", SLEEPER], cwd=ROOT,
                            env=_worker_env(tmp_path, token))
    try:
        deadline = time.monotonic() + 20
        while "sleeping" not in _read(tmp_path / "log") and time.monotonic() < deadline:
            time.sleep(0.05)
        status = read_status(str(tmp_path / "status"))
        os.kill(status.pid, STACK_SIGNAL)
        while not _read(stack_path(str(tmp_path / "status"))) and time.monotonic() < deadline:
            time.sleep(0.05)
        stack = clean_stack(_read(stack_path(str(tmp_path / "status"))))
        assert any("in napping" in line for line in stack), stack
        assert not any("run.py" in line or "runpy" in line for line in stack), stack
        os.kill(proc.pid, signal.SIGTERM)  # the supervisor passes it on
        assert proc.wait(timeout=10) == 128 + signal.SIGTERM
        assert read_status(str(tmp_path / "status")).signal == signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


def _read(path) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def test_report_names_the_root_cause_and_where_the_others_were(tmp_path):
    log = tmp_path / "workerlog.1"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    now = time.time()
    statuses = {
        0: WorkerStatus(pid=1, host="a", waiting=[("allreduce", now - 2)]),
        1: WorkerStatus(pid=2, host="b", error="ZeroDivisionError: boom", error_time=now - 1,
                        exit_code=1, ended=now - 1),
        2: WorkerStatus(pid=3, host="c"),
    }
    stacks = {2: 'Current thread 0x1 (most recent call first):\n  File "t.py", line 3 in f\n'
                 '  File "<frozen runpy>", line 88 in _run_code\n'}
    text = format_report(Outcome(statuses, 3, root=1, stopped={0, 2}, stacks=stacks),
                         str(tmp_path), lambda r: str(tmp_path / f"workerlog.{r}"))
    lines = text.splitlines()
    assert lines[0].startswith("paddle-launch: the job failed: rank 1 on b, exit code 1 "
                               "(ZeroDivisionError)")
    assert "rank 1 on b: [root cause] exit code 1: ZeroDivisionError: boom" in text
    assert "line 29" in text and "line 9\n" not in text + "\n"  # the last 20 lines
    assert f"log {log}, last 20 line(s):" in text
    assert "rank 0 on a: stopped by the launcher" in text and "waiting in allreduce" in text
    assert 'File "t.py", line 3 in f' in text and "runpy" not in text


def test_report_reads_a_collective_just_entered_from_the_stack(tmp_path):
    # Waits are recorded after 0.1 s; a rank asked sooner shows the collective in its stack.
    main = ('Current thread 0x1 (most recent call first):\n'
            '  File "/x/spmd/comm/mpi.py", line 129 in _wait\n'
            '  File "/x/spmd/comm/mpi.py", line 100 in wait\n'
            '  File "/x/spmd/comm/mpi.py", line 155 in allreduce\n'
            '  File "train.py", line 47 in main\n')
    comm_thread = ('Thread 0x2 (most recent call first):\n'
                   '  File "/x/spmd/comm/mpi.py", line 170 in broadcast\n'
                   '  File "/x/spmd/comm/progress.py", line 80 in _loop\n'
                   'Current thread 0x1 (most recent call first):\n'
                   '  File "/x/spmd/executor/plan.py", line 120 in run\n')
    sleeping = 'Current thread 0x1 (most recent call first):\n  File "t.py", line 3 in f\n'
    statuses = {r: WorkerStatus(pid=r + 1, host="a") for r in range(3)}
    statuses[3] = WorkerStatus(pid=4, host="a", exit_code=1, error="E: x", error_time=1.0,
                               ended=1.0)
    text = format_report(
        Outcome(statuses, 4, root=3, stopped={0, 1, 2},
                stacks={0: main, 1: comm_thread, 2: sleeping}),
        str(tmp_path), lambda r: str(tmp_path / f"workerlog.{r}"))
    assert "rank 0 on a: stopped by the launcher\n    waiting in allreduce (just entered" in text
    assert "rank 1 on a: stopped by the launcher\n    waiting in broadcast (just entered" in text
    assert "rank 2 on a: stopped by the launcher\n    not in a collective; its Python" in text
