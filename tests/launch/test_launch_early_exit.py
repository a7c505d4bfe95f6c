"""A rank that leaves before the job's first collective, however it leaves, ends a
paddle-launch job in seconds, non-zero, naming the rank, instead of leaving the others blocked
in MPI start-up (issue 23 item 5; a bounded timeout makes a hang fail the test)."""
from __future__ import annotations

import pytest
from launch_helpers import SCRIPTS, launcher, run

EARLY = str(SCRIPTS / "early_exit.py")


@pytest.mark.parametrize("how", ["exit0", "os_exit0", "exit3", "raise"])
def test_paddle_launch_ends_a_job_whose_rank_left_before_mpi(how, tmp_path, token):
    res = run(launcher("--nproc_per_node", "2", "--log_dir", str(tmp_path / "log"), EARLY,
                       "--how", how, "--token", token), token, timeout=90)
    assert res.returncode != 0, res.output[-3000:]
    assert "rank 1" in res.output, res.output[-3000:]
    report = (tmp_path / "log" / "failure_report.txt").read_text()
    assert "rank 1" in report.splitlines()[0], report
