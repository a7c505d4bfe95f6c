"""An async collective over MPI that outlives the collective timeout ends the whole job, by
design: the thread running it is stuck in a call that cannot be interrupted (spmd/comm/
progress.py). So it is tested here, in a job of its own: rank 1 never joins rank 0's
iallreduce; the job must end, non-zero, within a bound, saying which op, in which
Executor.run, and which rank never arrived. (A blocking collective raises instead:
tests/dist/mpi/test_collective_suite.py.)"""
from __future__ import annotations

import textwrap

import pytest
from mpirun import run_mpi

PROGRAM = textwrap.dedent("""
    import sys
    import time

    import numpy as np

    import spmd  # noqa: F401 - first, as a program does: its guard watches the job
    from spmd.comm.mpi import MPICommunicator

    comm = MPICommunicator(track_arrivals=True)
    comm.barrier()  # collective #1, on both ranks
    if comm.rank == 1:
        time.sleep(120)  # never reaches the allreduce (ended with the job long before)
        sys.exit(0)
    how = sys.argv[1]
    if how == "wait":
        comm.iallreduce(np.ones(4)).wait()
    elif how == "wait_all":
        comm.iallreduce(np.ones(4))
        comm.wait_all()
    else:  # at once, on the caller's thread, under the watchdog
        comm.iallreduce(np.ones(4), overlap=False)
    print("the allreduce completed without rank 1", flush=True)
""")

TIMEOUT_S = 2
BOUND_S = 60  # the job must have ended by then (a hang fails the test)


@pytest.mark.timeout(2 * BOUND_S)
@pytest.mark.parametrize("how", ["wait", "wait_all", "at-once"])
def test_an_async_collective_a_rank_never_joins_ends_the_job_naming_it(how):
    res = run_mpi(2, ["-c", PROGRAM, how], timeout=BOUND_S,
                  env={"SPMD_COLLECTIVE_TIMEOUT": str(TIMEOUT_S)})
    out = res.stdout
    assert res.returncode != 0, f"the job ended with code 0:\n{out[-4000:]}"
    assert "completed without rank 1" not in out, out[-4000:]
    assert f"[rank 0/2] allreduce (in Executor.run #0) did not complete within {TIMEOUT_S} s" \
        in out, out[-4000:]
    assert "rank(s) 1 (its last was #1, barrier) never reached it" in out, out[-4000:]
    assert "ending the job" in out, out[-4000:]
