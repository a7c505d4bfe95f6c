"""Never hang, never lie: how one rank's end reaches the others.

From `import spmd` on, in every process an MPI launcher started:

- an uncaught exception prints its traceback and aborts the whole job (MPI_Abort), also when
  the other ranks wait in the program's own mpi4py calls;
- with more than one rank (or under paddle-launch), the program runs under a supervisor, a
  fork made before MPI starts (spmd/guard/supervisor.py). The supervisors keep a channel to
  rank 0's (spmd/guard/channel.py), made at spmd's first MPI use. A rank that leaves the job,
  however it leaves (the end of its script, sys.exit, os._exit, a signal), is announced to
  all; a rank waiting in a collective the departed rank never joined fails at once, naming it,
  instead of waiting for the collective timeout.

SPMD_SUPERVISE=0 turns the supervisor and channel off (the abort hook stays). A program that
initializes MPI (or starts a thread) before `import spmd` gets no supervisor, since a fork is
then unsafe: import spmd first.

>>> from spmd import guard
>>> guard.departure_message("allreduce", "[rank 0/1]") is None
True
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import time

from .. import events
from . import abort as _abort
from . import state as st
from .abort import flush_to_process_manager

__all__ = ["abort_job", "attach", "departure_message", "flush_to_process_manager", "install",
           "let_the_reporter_speak", "note_collective", "note_exit_code", "note_mpi_start_failed",
           "note_job_start", "note_mpi_starting", "note_step", "peer_died_in_start", "rendezvous",
           "report_failure", "supervised"]

_SUPERVISED_ENV = "SPMD_SUPERVISED"  # set in the supervised program: its children never fork
_shared: st.SharedState | None = None
_hook_installed = False
_CONNECT_WAIT_S = 10.0
_launcher_stops_failures = False  # under paddle-launch: it stops the others after a failure


def abort_job(code: int) -> None:
    """MPI_Abort the job when MPI is up with other ranks (spmd/guard/abort.py), the others'
    supervisors told first; in the job's MPI start-up, this process only ends (its supervisor
    tells the others and ends the job)."""
    _abort.abort_job(code, _in_job_start(), tell_peers_before_abort)


def attach(shared: st.SharedState | None) -> None:
    """Read progress and departures from `shared` from now on (install() attaches the state
    it shares with the supervisor; tests attach their own)."""
    global _shared
    _shared = shared


def supervised() -> bool:
    """Whether this process runs under a supervisor with a channel to its peers' (after spmd's
    first MPI use)."""
    return _shared is not None and _shared.slots[st.CHANNEL] == 1


def install() -> None:
    """At `import spmd`: the abort hook always; the supervisor where it applies. A trainer
    started with fluid's PADDLE_* variables only is first re-executed under its own mpiexec
    (spmd/comm/join.py), before anything else happens in it."""
    _reexec_env_only_trainer()
    _install_abort_hook()
    from ..flags import flags

    settings = flags()
    rank, size = _launcher_rank_size()
    wants = (size > 1 and settings.supervise) or settings.status_file
    if not wants or os.environ.get(_SUPERVISED_ENV) or not _safe_to_fork() or \
            _in_paddle_launch():
        return
    global _shared, _launcher_stops_failures
    _launcher_stops_failures = bool(settings.status_file)
    _shared = st.SharedState()
    channel = size > 1 and settings.supervise
    if not channel:
        _shared.slots[st.CHANNEL] = -1  # supervised for paddle-launch's status file only
    on_end = _status_recorder(settings.status_file) if settings.status_file else None
    from ..blas_threads import size_before_fork
    from .supervisor import supervise

    size_before_fork()  # numpy loaded first: its BLAS pool sized now, not rebuilt in the child

    supervise(rank, size if channel else 1, _shared, on_end,
              launcher_stops_ranks=bool(settings.status_file))
    os.environ[_SUPERVISED_ENV] = "1"  # in the child only: supervise() returns there
    atexit.register(_leaving)
    _record_sys_exit_codes()
    sys.meta_path.insert(0, _NoteMPIImport())


def _reexec_env_only_trainer() -> None:
    if "PADDLE_TRAINERS_NUM" not in os.environ or os.environ.get(_SUPERVISED_ENV) or \
            not _safe_to_fork():
        return  # the common case costs one look-up: no join module loaded
    if _in_paddle_launch():
        return
    from ..comm.join import env_only_start, reexec_under_mpiexec

    if env_only_start():
        reexec_under_mpiexec()


def _in_paddle_launch() -> bool:
    """Whether this process is paddle-launch itself (our launch package is loaded: it reads
    spmd.flags, spmd.launcher_vars, ... and so imports spmd). It is never a rank: under an MPI
    process manager it execs the worker (launch/job.py), which installs its own guard; a
    supervisor forked here would outlive the exec and stand in for a program it cannot see."""
    launcher = sys.modules.get("launch")
    return launcher is not None and os.path.dirname(os.path.dirname(
        getattr(launcher, "__file__", "") or "")) == \
        os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


class _NoteMPIImport:
    """A finder that finds nothing: it notes that the program imports mpi4py.MPI (which
    starts MPI), so its supervisor never stands in for a program that began to."""

    def find_spec(self, name, path=None, target=None):
        if name == "mpi4py.MPI":
            note_mpi_starting()
        return None


def note_mpi_start_failed() -> None:
    """MPI start-up timed out: the process exits at once (MPI is half started) and its
    supervisor ends the whole job."""
    global _mpi_start_failed
    _mpi_start_failed = True
    if _shared is not None:
        _shared.slots[st.MPI_START_FAILED] = 1


_mpi_start_failed = False


def note_mpi_starting() -> None:
    """The program is about to start MPI (spmd's first MPI use, or its own mpi4py)."""
    if _shared is not None:
        _shared.slots[st.MPI_STARTED] = 1


def note_job_start(starting: bool) -> None:
    """The program enters (True) or leaves (False) the job's MPI start-up: spmd's first MPI
    use, up to the supervisors' rendezvous. A program that dies in it is told to the node's
    other ranks by its supervisor (spmd/guard/early_news.py)."""
    if _shared is not None:
        _shared.slots[st.STARTING] = 1 if starting else 0


def peer_died_in_start() -> str | None:
    """While this rank waits in the job's MPI start-up: when a peer died in it (its
    supervisor told this one's), the line that says so; None otherwise. Under paddle-launch
    None: the launcher stops this rank and reports."""
    if _shared is None or not _shared.slots[st.DEPARTED] or _launcher_stops_failures:
        return None
    from .stand_in import cause

    gone = _shared.departure()
    rank, size = _launcher_rank_size()
    how = cause(gone["code"], gone["signal"], "", True)
    return (f"[rank {rank}/{size}] stopped: rank {gone['rank']} ended in the job's MPI "
            f"start-up, before its first collective ({how}; its message is above)")


def _stop_if_peer_died_in_start() -> None:
    text = peer_died_in_start()
    if text is not None:
        from ..events import StoppedByPeer

        _shared.slots[st.STARTING] = 0  # stopped by the peer: nothing of its own to tell
        raise StoppedByPeer(text)


def _record_sys_exit_codes() -> None:
    """Python's atexit cannot see the code a script exits with; sys.exit(n), the common way,
    is wrapped to note it first, so the others can be told it (`raise SystemExit(n)` is not
    seen: the code is then reported as not known)."""
    original = sys.exit

    def exit_noting_the_code(status=None):
        code = 0 if status is None else status if isinstance(status, int) else 1
        note_exit_code(code & 0xFF)
        original(status)

    exit_noting_the_code.__doc__ = original.__doc__
    sys.exit = exit_noting_the_code


def _launcher_rank_size() -> tuple[int, int]:
    from ..comm.topology import launcher_rank_size

    return launcher_rank_size()


def _safe_to_fork() -> bool:
    """A fork is safe before MPI starts and while this is the process's only thread."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized():
        return False
    return threading.current_thread() is threading.main_thread() and \
        threading.active_count() == 1 and not sys.flags.interactive


def _status_recorder(status_file: str):
    def record(code: int, sig: int, error: str | None) -> None:
        from ..status_file import append_event

        if error:
            append_event(status_file, "error", error)
        append_event(status_file, "ended", f"signal={sig}" if sig else f"code={code}")

    return record


def _install_abort_hook() -> None:
    global _hook_installed
    if _hook_installed:
        return
    _hook_installed = True
    previous = sys.excepthook

    def abort_all(kind, value, tb):
        report_failure(value, lambda: previous(kind, value, tb))
        if _mpi_start_failed or _in_job_start():
            # MPI_Init may still run in its thread: no Python exit, no Finalize. And no
            # MPI_Abort: it would kill the others before they can say why; the supervisor
            # tells them and ends the job (spmd/guard/supervisor.py)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
        abort_job(1)

    sys.excepthook = abort_all


def _in_job_start() -> bool:
    """In the job's MPI start-up, before the supervisors' channel is decided."""
    return _shared is not None and bool(_shared.slots[st.STARTING]) and \
        _shared.slots[st.CHANNEL] == 0


def summary(error: BaseException) -> str:
    """`Kind: first line of the message`."""
    lines = str(error).strip().splitlines()
    return type(error).__name__ + (f": {lines[0]}" if lines else "")


def _where(error: BaseException) -> str:
    """The innermost frame of the program's own code, and how far the rank got."""
    import traceback

    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if "/spmd/" not in f.filename and "runpy" not in f.filename]
    place = (f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in "
             f"{frames[-1].name}, " if frames else "")
    if _shared is None:
        return place + f"in its Executor.run #{_steps}"
    if _shared.slots[st.CHANNEL] != 1 and not _shared.slots[st.COLLECTIVES]:
        return place + ("before the job's first collective (before MPI started)"
                        if not _shared.slots[st.MPI_STARTED] else
                        "in the job's start, before its first collective")
    return place + (f"after collective #{int(_shared.slots[st.COLLECTIVES])} (in its "
                    f"Executor.run #{int(_shared.slots[st.STEPS])})")


def _peer_failed_first(rank: int) -> dict | None:
    """The earliest failure of a peer this rank's supervisor heard of, by (collective count,
    rank), when it came before this rank's own: then it is the job's root cause. A rank
    other than 0 first gives the lower ranks a moment: when every rank fails alike (the
    ranks compiled different programs, a collective timed out everywhere) the lowest one
    reports, and its MPI_Abort ends the others before they repeat it."""
    if rank > 0:
        time.sleep(min(1.0, 0.25 * rank))
    if _shared is None:
        return None
    first = _shared.earliest_failure()
    mine = (int(_shared.slots[st.COLLECTIVES]), rank)
    if first is not None and (first["collectives"], first["rank"]) < mine:
        return first
    return None


def report_failure(error: BaseException, print_traceback) -> None:
    """What a failing rank prints: the root-cause block (rank, where, cause, fix) first and
    then its traceback; or, when another rank failed first or stopped this one, one line."""
    from ..events import StoppedByPeer

    rank, size = _launcher_rank_size()
    tag = f"[rank {rank}/{size}]"
    if isinstance(error, StoppedByPeer):
        time.sleep(0.5)  # the rank that failed prints its block first
        if _shared is not None and _shared.slots[st.STOP_SAID]:
            time.sleep(1.5)
            return  # its supervisor said it already (a peer aborts the job)
        text = str(error).splitlines()[0] if str(error) else "stopped"
        sys.stderr.write((text if text.startswith("[rank") else f"{tag} {text}") + "\n")
        sys.stderr.flush()
        time.sleep(1.5)  # its stand-in ends the job with its own code
        return
    if _shared is not None:
        _shared.set_error(summary(error))
        _shared.slots[st.FAILING] = 1
    first = _peer_failed_first(rank) if size > 1 else None
    if first is not None and _shared is not None and _shared.slots[st.STOP_SAID]:
        return  # its supervisor said it already (a peer aborts the job)
    if first is not None:
        ended = (f"signal {first['signal']}" if first["signal"] else
                 f"exit code {first['code']}")
        sys.stderr.write(f"{tag} stopped: rank {first['rank']} failed first ({ended}, after "
                         f"its collective #{first['collectives']}); this rank then: "
                         f"{summary(error)[:300]}\n")
        sys.stderr.flush()
        return
    if size > 1:
        sys.stderr.write(f"{tag} FAILED: {summary(error)}\n{tag}   where: {_where(error)}\n"
                         f"{tag}   fix: {_fix(error)}\n")
    print_traceback()
    sys.stderr.flush()


def _fix(error: BaseException) -> str:
    from ..errors import SpmdError

    if isinstance(error, SpmdError):
        return "as the error says (the message ends with what to do); traceback below"
    return ("this rank's own error (traceback below); the other ranks are stopped because "
            "of it")


def _leaving() -> None:
    """atexit, in the supervised program: its script ended (the end, or sys.exit). Runs before
    mpi4py's MPI_Finalize, which waits for every rank: the supervisor announces it now."""
    if _shared is not None:
        mpi = sys.modules.get("mpi4py.MPI")
        if mpi is not None and mpi.Is_initialized():
            _shared.slots[st.MPI_STARTED] = 1
        if _in_job_start():  # sys.exit in the job's MPI start-up: MPI_Finalize (or Python's
            sys.stdout.flush()  # end, with MPI_Init in its thread) would wait for the others
            sys.stderr.flush()
            code = int(_shared.slots[st.EXIT_CODE])
            os._exit(code if code >= 0 else 1)
        _shared.slots[st.LEAVING] = 1


def rendezvous(comm) -> None:
    """At spmd's first MPI use (collective over the mpi4py communicator `comm`, COMM_WORLD):
    rank 0's supervisor address to every supervisor, then agree whether every one connected.
    The channel is used only when all did; otherwise collectives rely on their timeout."""
    if comm.Get_size() == 1:
        return
    import numpy as np
    from mpi4py import MPI

    from ..flags import flags

    if flags().supervise:
        _check_everyone_came(comm, np, flags)
    if _shared is None or _shared.slots[st.CHANNEL] != 0:
        return

    text = ""
    if comm.Get_rank() == 0:  # the channel (its sockets) is loaded here already: the listener
        from .channel import candidate_addresses, no_address_reason

        port = int(_shared.slots[st.LISTEN_PORT])
        text = candidate_addresses(port) if port else st.NO_ADDRESS_MARK + no_address_reason()
    length = np.array([len(text.encode())], dtype=np.int64)
    _wait_in_start(comm, comm.Ibcast(length, root=0), flags)
    buf = np.frombuffer(text.encode(), dtype=np.uint8).copy() if comm.Get_rank() == 0 else \
        np.empty(int(length[0]), dtype=np.uint8)
    _wait_in_start(comm, comm.Ibcast(buf, root=0), flags)
    text = buf.tobytes().decode()
    if text.startswith(st.NO_ADDRESS_MARK):  # rank 0's supervisor could not listen: every rank
        _shared.slots[st.CHANNEL] = -1    # fails alike, the lowest one reporting
        from ..errors import CommunicationError

        raise CommunicationError(f"[rank {comm.Get_rank()}/{comm.Get_size()}] "
                                 f"{text[len(st.NO_ADDRESS_MARK):]}")
    _shared.set_address(text)
    deadline = time.monotonic() + _CONNECT_WAIT_S
    while not _shared.slots[st.CONNECTED] and _shared.slots[st.CHANNEL] != -1 and \
            time.monotonic() < deadline:
        _stop_if_peer_died_in_start()
        time.sleep(0.001)  # every rank waits here for the supervisors: wake soon after
    ok = np.array([1 if _shared.slots[st.CONNECTED] else 0], dtype=np.int64)
    _wait_in_start(comm, comm.Iallreduce(MPI.IN_PLACE, ok, op=MPI.MIN), flags)
    _shared.slots[st.CHANNEL] = 1 if ok[0] else -1
    if not ok[0] and comm.Get_rank() == 0:
        sys.stderr.write(
            "spmd: warning: the ranks' supervisors could not all reach rank 0's (TCP, "
            f"addresses {text}); a rank that ends early is then noticed only by the "
            "collective timeout (SPMD_COLLECTIVE_TIMEOUT)\n")


def _wait_in_start(comm, req, flags, what: str = "the supervisors' rendezvous at spmd's "
                   "first MPI use", hint: str = "") -> None:
    """Wait for the start's request `req`: stop when a peer died in the job's start, fail
    past the collective timeout (a blocking call would wait for a dead peer for ever),
    naming `what` did not finish and why it may not have (`hint`)."""
    timeout = flags().collective_timeout_s
    deadline = time.monotonic() + timeout
    while not req.Test():
        _stop_if_peer_died_in_start()
        if time.monotonic() > deadline:
            from ..errors import CommunicationError

            raise CommunicationError(
                f"[rank {comm.Get_rank()}/{comm.Get_size()}] the job's start ({what}) did "
                f"not complete within {timeout:g} s (SPMD_COLLECTIVE_TIMEOUT): another rank "
                f"never reached it{hint}")
        time.sleep(0.001)


def _check_everyone_came(comm, np, flags) -> None:
    """The first of the rendezvous: who is here. A rank whose program ended before it
    started MPI is stood in for by its supervisor (spmd/guard/stand_in.py), which says so
    here; the ranks present then stop, naming it, instead of waiting for it."""
    from .stand_in import PRESENT, RECORD, cause

    table = np.zeros((comm.Get_size(), RECORD), dtype=np.int64)
    # non-blocking, as the stand-in's: MPI never matches a blocking collective with one
    req = comm.Iallgather(np.array([PRESENT, 0, 0], dtype=np.int64), table)
    _wait_in_start(comm, req, flags, "spmd's first MPI use",
                   " (it hangs, or works longer than that before its first collective); every "
                   "rank must reach its first collective (the startup program's run) within "
                   "the timeout")
    gone = [r for r in range(comm.Get_size()) if table[r, 0] != PRESENT]
    if gone:
        from ..events import StoppedByPeer

        if _shared is not None:  # stopped by a stand-in: nothing of its own to tell
            _shared.slots[st.STARTING] = 0
        rank, size = comm.Get_rank(), comm.Get_size()
        who = "; ".join(f"rank {r} ({cause(int(table[r, 1]), int(table[r, 2]), '', True)})"
                        for r in gone)
        raise StoppedByPeer(f"[rank {rank}/{size}] stopped: {who} ended before the job's "
                            f"first collective, before MPI started (its message is above)")


def note_collective() -> int:
    """Count a collective this rank enters; returns its number (1, 2, ...)."""
    if _shared is None:
        return 0
    slots = _shared.slots
    slots[st.COLLECTIVES] += 1
    return int(slots[st.COLLECTIVES])


def note_exit_code(code: int) -> None:
    """The code this program is about to exit with, where known (spmd.run knows it)."""
    if _shared is not None:
        _shared.slots[st.EXIT_CODE] = code


_steps = 0  # Executor.run calls of this process, supervised or not


def note_step() -> None:
    """Count an Executor.run (the runs both sides reached, in a departure message)."""
    global _steps
    _steps += 1
    if _shared is not None:
        _shared.slots[st.STEPS] += 1


def steps() -> int:
    """How many Executor.run calls this process started (named when a collective times out)."""
    return _steps


_TOLD_WAIT_S = 1.0  # for the supervisor to send the news (it polls every 50 ms)
_PRINT_WAIT_S = 0.5  # for the others' supervisors to hear it and print their line


def tell_peers_before_abort(code: int) -> None:
    """Before this rank MPI_Aborts the job (which kills every rank at once, none able to say
    why): its supervisor tells the others' through the channel, and their supervisors print
    each rank's `stopped: rank k failed first (...)` line; a moment for that, then the abort."""
    if _shared is None or _shared.slots[st.CHANNEL] != 1 or _launcher_stops_failures:
        return
    slots = _shared.slots
    slots[st.ABORT_CODE] = code
    slots[st.ABORTING] = 1
    deadline = time.monotonic() + _TOLD_WAIT_S
    while not slots[st.ABORT_TOLD] and time.monotonic() < deadline:
        time.sleep(0.005)
    if slots[st.ABORT_TOLD]:
        time.sleep(_PRINT_WAIT_S)


def let_the_reporter_speak() -> None:
    """Before failing for a departure: the lowest rank still here reports it; the others give
    it a moment to abort the job, so the cause is printed once, not once per rank."""
    gone = _shared.departure() if _shared is not None else None
    reporter = 1 if gone and gone["rank"] == 0 else 0
    from ..comm.topology import launcher_rank_size

    if gone and launcher_rank_size()[0] != reporter:
        time.sleep(3.0)


def departure_message(op: str, tag: str) -> str | None:
    """When a peer left the job before joining this rank's current collective `op`: what to
    tell the user; None otherwise (also while no peer left)."""
    if _shared is None or not _shared.slots[st.DEPARTED]:
        return None
    gone = _shared.departure()
    if gone["how"] == st.FAILED and _launcher_stops_failures:
        return None  # paddle-launch stops this rank itself, after asking where it waits
    mine = int(_shared.slots[st.COLLECTIVES])
    if 0 <= mine <= gone["collectives"]:
        return None  # it joined this collective before leaving: this one completes
    ended = (f"signal {gone['signal']}" if gone["signal"] else
             f"exit code {gone['code']}" if gone["code"] >= 0 else
             "exit code not known (raise SystemExit: the launcher reports it)")
    where = (f"after collective #{gone['collectives']} (in its Executor.run "
             f"#{gone['steps']})" if gone["collectives"] >= 0 else "at an unknown point")
    steps = int(_shared.slots[st.STEPS])
    if gone["how"] == st.FAILED:  # its own message is the job's cause: this one is short
        return (f"{tag} stopped: rank {gone['rank']} failed {where} ({ended}), while this rank "
                f"waits in {op}, collective #{mine}")
    return (f"{tag} rank {gone['rank']} left the job {where}, {ended} "
            f"{st.HOW[gone['how']]}, while this rank waits in {op}, collective #{mine} "
            f"(in its Executor.run #{steps}): every rank must run the same collectives. Give "
            f"every rank the same number of steps (the same number of batches), and end them "
            f"together")


events.supervise_with(sys.modules[__name__])  # comm tells this module, without importing it
