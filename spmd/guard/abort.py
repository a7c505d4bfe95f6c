"""Ending the whole MPI job from one rank, without losing what that rank printed."""
from __future__ import annotations

import os
import sys
import time

from ..events import StoppedByPeer  # noqa: F401 - its home was here; importers find it here


def abort_job(code: int, in_job_start: bool = False, before_abort=None) -> None:
    """MPI_Abort the job when MPI is up with other ranks, after this rank's output has reached
    the process manager. Best effort: it returns when there is nothing to abort.
    `in_job_start`: the rank is in the job's MPI start-up (spmd.guard says); `before_abort(code)`
    runs just before the abort (spmd.guard's: the supervisor tells the others first)."""
    if in_job_start:
        # in the job's MPI start-up: an MPI_Abort (or, with MPI_Init still in its thread,
        # anything of Python's exit) would kill the others before they can say why; this
        # rank's supervisor tells them and ends the job (spmd/guard/supervisor.py)
        flush_to_process_manager(0.5)
        os._exit(code)
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return
    try:
        # trainers joined without a launcher (spmd/comm/join.py) each have a COMM_WORLD of
        # one: their supervisors end the others (spmd/guard/supervisor.py)
        if mpi.Is_initialized() and not mpi.Is_finalized() and mpi.COMM_WORLD.Get_size() > 1:
            if before_abort is not None:
                before_abort(code)
            flush_to_process_manager()
            mpi.COMM_WORLD.Abort(code)
        if mpi.Is_initialized() and not mpi.Is_finalized() and \
                os.environ.get("SPMD_JOIN_START") == "1":
            # MPI_Finalize waits for every connected process, which may wait for this one
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    except Exception:  # noqa: BLE001 - already failing; never mask the original error
        pass


def flush_to_process_manager(limit_s: float = 3.0):
    """Flush stdout and stderr and, where they are pipes to the process manager's proxy (as
    under mpiexec), wait until the proxy has read them, up to `limit_s`.

    MPI_Abort makes the process manager kill every process at once; a traceback still sitting
    in the pipe is then lost, and the user sees a job that failed without saying why."""
    import fcntl
    import stat
    import struct
    import termios

    deadline = time.monotonic() + limit_s
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
            fd = stream.fileno()
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                continue
            while time.monotonic() < deadline:
                unread = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
                if unread == 0:
                    break
                time.sleep(0.01)
        except (OSError, ValueError, AttributeError):  # closed or replaced streams: best effort
            continue
    # The proxy has read the bytes; give it a moment to pass them on before the kill.
    time.sleep(0.1)
