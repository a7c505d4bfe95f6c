"""Under mpiexec, a rank that fails aborts the job (MPI_Abort), which kills every rank at once:
before it does, its supervisor tells the others' (the supervisors' channel), and each other
rank says in one line that it was stopped and by whom (issue 23 item 6), after the failing
rank's root-cause block."""
from __future__ import annotations

import re

from launch_helpers import MPIEXEC, PYTHON, SCRIPTS, run

CRASH = str(SCRIPTS / "crash.py")


def test_every_other_rank_says_who_stopped_it(token):
    res = run([MPIEXEC, "-n", "3", PYTHON, CRASH, "--mode", "raise", "--rank", "1", "--step",
               "1", "--token", token], token, timeout=120)
    assert res.returncode != 0, res.output[-3000:]
    err = res.stderr
    block = err.find("[rank 1/3] FAILED: ZeroDivisionError: rank 1 failed on purpose at step 1")
    assert block >= 0, err[-3000:]
    for other in (0, 2):  # waiting in the step's allreduce when rank 1 failed
        lines = re.findall(rf"\[rank {other}/3\] stopped: rank 1 failed first \(exit code 1, "
                           rf"after its collective #1\)[^\n]*", err)
        assert len(lines) == 1, err[-3000:]  # once: by its supervisor or by itself
        assert err.find(lines[0]) > block, err[-3000:]  # after the root cause
    assert "killed by signal" not in err, err[-3000:]
