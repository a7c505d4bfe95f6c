"""A supervisor stands in for its program that ended before it ever started MPI.

The other ranks would wait for it in MPI start-up forever: under mpiexec, srun or paddle-launch
MPI_Init waits for every rank of the world, and Hydra does not end a job whose process exited
with a code (only one killed by a signal). So the supervisor, which has the process manager's
variables and never used them, starts MPI in the program's place: the world then forms, the
ranks that are there learn at their first MPI use (spmd.guard.rendezvous: one all-gather of who
is present) that this rank has gone, and the job is aborted, naming the rank and its cause.
Trainers started with PADDLE_* variables only (spmd/comm/join.py) are told through trainer
0's join point instead.

When every rank ended before MPI (`mpiexec -n 2 python -c "import spmd"`) nothing is wrong:
each stand-in sees no rank present, finalizes MPI and exits with its program's code, through
the C library's exit (spmd/guard/supervisor.py's _end_process: MPICH tells the process manager
it finalized only in a C exit handler, and Hydra kills the job of a process that leaves
without it).
"""
from __future__ import annotations

import os
import signal
import sys
import time

PRESENT, ABSENT = 1, 0
RECORD = 3  # present?, exit code, signal


def cause(code: int, sig: int, error: str, short: bool = False) -> str:
    """How the program ended, in words."""
    if error:
        return error
    if short:
        return f"signal {sig}" if sig else f"exit code {code}"
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {sig} ({name})"
    if code:
        return f"exit code {code} (sys.exit({code}), or an error printed above)"
    return "exit code 0 (sys.exit(0), os._exit(0), or the end of its script)"


def block(tag: str, code: int, sig: int, error: str, in_start: bool = False) -> str:
    """The root-cause block, printed first. `in_start`: the program ended in the job's MPI
    start-up (spmd's first MPI use), not before it."""
    fix = ("every rank must reach the job's first collective (the startup program's run, a "
           "CompiledProgram's first step): fix this rank's error, or end all ranks together"
           if (code or sig) else
           "a rank may end early only after the job's first collective has run everywhere; "
           "let every rank run the same steps")
    when, where = (("in the job's MPI start-up", "in spmd's first MPI use (MPI_Init or the "
                    "supervisors' rendezvous), no collective run yet") if in_start else
                   ("(before MPI started)", "before spmd's first MPI use (no collective run "
                    "yet)"))
    return (f"{tag} FAILED before the job's first collective {when}: "
            f"{cause(code, sig, error)}\n"
            f"{tag}   where: {where}\n"
            f"{tag}   fix: {fix}\n")


_record = None  # (code, first line) -> None: paddle-launch's status file, before an abort


def say(text: str) -> None:
    """To the rank's log: the worker log paddle-launch gave it (the program's output goes
    there; this process's stderr is the process manager's), else stderr."""
    from ..flags import flags

    log = flags().worker_log
    if log:
        with open(log, "a") as f:
            f.write(text)
    else:
        sys.stderr.write(text)
        sys.stderr.flush()
    if _record is not None and "FAILED" in text:
        _record(text.splitlines()[0])


def stand_in(rank: int, size: int, code: int, sig: int, error: str,
             timeout_s: float, joined: bool, record=None) -> int:
    """Take the program's place in the job's start; the exit code this process should end
    with (it may also end by MPI_Abort). `record(text)` gets the cause's line as soon as it
    is printed (the process may be aborted before it exits)."""
    global _record
    _record = record
    tag = f"[rank {rank}/{size}]"
    failed = bool(code or sig)
    if failed and error:  # the program printed its block (spmd.guard.report_failure)
        say(f"{tag} it ended before the job's first collective: ending the job\n")
        if record is not None:
            record(error)
    elif failed:
        say(block(tag, code, sig, error))
    if joined:
        return _stand_in_join(tag, code, sig, error, timeout_s)
    return _stand_in_mpi(tag, size, code, sig, error, timeout_s)


def _start_mpi(deadline: float):
    """MPI_Init until `deadline`; mpi4py's MPI, or None if the other ranks never started MPI
    by then."""
    from ..comm.mpi import init_mpi_within

    if not init_mpi_within(max(0.0, deadline - time.monotonic())):
        return None
    from mpi4py import MPI

    return MPI


def _stand_in_mpi(tag, size, code, sig, error, timeout_s) -> int:
    import numpy as np

    failed = bool(code or sig)
    deadline = time.monotonic() + timeout_s
    MPI = _start_mpi(deadline)
    if MPI is None:  # the others never started MPI: a job without MPI, or they are busy
        if not failed:  # nothing failed; one that starts MPI later fails by its own timeout
            return 0
        say(f"{tag} the other ranks did not start MPI within {timeout_s:g} s "
             f"(SPMD_COLLECTIVE_TIMEOUT); ending the job\n")
        os.kill(os.getpid(), signal.SIGKILL)  # Hydra ends a job whose process is killed
    table = np.zeros((size, RECORD), dtype=np.int64)
    req = MPI.COMM_WORLD.Iallgather(np.array([ABSENT, code, sig], dtype=np.int64), table)
    while not req.Test() and time.monotonic() < deadline:
        time.sleep(0.005)
    complete = req.Test()
    present = [r for r in range(size) if table[r, 0] == PRESENT] if complete else None
    if present == []:  # no rank ran a job: each ends as its program did
        MPI.Finalize()
        return code or (128 + sig if sig else 0)
    if not failed:
        say(block(tag, code, sig, error))
    if present is None:
        say(f"{tag} the other ranks did not reach spmd's start-up within {timeout_s:g} s "
             f"(they wait in MPI calls of their own?); ending the job\n")
    time.sleep(1.0)  # the present ranks say they were stopped; then the job ends
    MPI.COMM_WORLD.Abort(code or 1)
    return code or 1


def _stand_in_join(tag, code, sig, error, timeout_s) -> int:
    from ..comm import join as jn

    spec = jn.Spec()
    if spec.trainer != 0:  # tell trainer 0, which fails the job, naming this trainer
        text = cause(code, sig, error)
        state = 0x10000 | (sig << 8) | (code & 0xFF)
        try:
            sock, _ = jn.say_hello(spec, state, text, deadline=time.monotonic() + timeout_s)
            sock.close()
        except jn.JoinError:
            return code or (128 + sig if sig else 0)  # nobody waits for this trainer
        if not (code or sig):
            say(block(tag, code, sig, error))
        return code or (128 + sig if sig else 1)
    # trainer 0: answer every trainer that comes with why the job cannot start
    text = f"trainer 0 ended before the job started: {cause(code, sig, error)}"
    try:
        listener = jn.listen_at(*spec.root)
    except jn.JoinError as e:
        say(f"{tag} {e}\n")
        return code or 1
    gathering = jn.Gathering(spec, listener)
    told_any = False
    deadline = time.monotonic() + timeout_s
    while gathering.missing() and time.monotonic() < deadline:
        gathering.run(min(deadline, time.monotonic() + 0.5))
        if gathering.joiners:
            told_any = True
            gathering.tell_all(b"FAIL", text)
        gathering.answered.update(gathering.joiners, gathering.absent)
        for p in gathering.joiners.values():
            p.sock.close()
        gathering.joiners.clear()
        gathering.absent.clear()
    gathering.close()
    if told_any and not (code or sig):
        say(block(tag, code, sig, error))
    return code or (128 + sig if sig else (1 if told_any else 0))
