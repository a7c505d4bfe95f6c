"""`python -m spmd.run script.py [args...]`: run a user script so that one crash ends every rank.

As with `python -m mpi4py script.py`, an uncaught exception (or a non-zero `sys.exit`) on any
rank prints its traceback and aborts the whole MPI job, instead of leaving the other ranks
waiting in a collective forever::

    mpiexec -n 4 python -m spmd.run train.py --epochs 3
    python -m spmd.run -m mypackage.train           # a module instead of a file

Started by paddle-launch (which sets SPMD_STATUS_FILE and SPMD_WORKER_LOG), a worker also

- writes its stdout and stderr to its log, SPMD_WORKER_LOG;
- runs under the supervisor `import spmd` makes (spmd/guard), a fork made before MPI starts,
  which records how the worker ended (exit code, or the signal that killed it: only a parent
  can see a SIGKILL);
- records its life in the status file, one event a line (see spmd/status_file.py), which the
  launcher reads while the job runs;
- dumps its Python stack to `stack_path(status file)` on `STACK_SIGNAL`, which the launcher
  sends to the ranks still running before it stops a failed job;
- leaves stopping the other ranks to the launcher, so it can ask them where they were first.

This module imports nothing from spmd but spmd.flags and spmd.status_file (the status file's
format, shared with paddle-launch, which must not pay for the engine).
"""
from __future__ import annotations

import faulthandler
import os
import runpy
import signal
import socket
import sys
import traceback

from .status_file import WorkerStatus, append_event, read_status  # noqa: F401 - re-exported

STACK_SIGNAL = signal.SIGUSR2
"""The signal on which a worker started by paddle-launch dumps its Python stack. Not SIGUSR1:
MPICH's Hydra sends that to the surviving ranks when one fails."""

_USAGE = "usage: python -m spmd.run [-m module | script.py] [args...]"
_stack_file = None  # kept open: faulthandler writes to it from its signal handler


def stack_path(status_file: str) -> str:
    """Where the worker with this status file dumps its stack on STACK_SIGNAL."""
    return status_file + ".stack"


def _parse(argv: list[str]) -> tuple[str, str, list[str]]:
    """('path' | 'module', target, sys.argv for the script); bad usage exits 2."""
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE, file=sys.stderr if not argv else sys.stdout)
        raise SystemExit(2 if not argv else 0)
    if argv[0] == "-m":
        if len(argv) < 2:
            print(f"spmd.run: error: -m needs a module name; {_USAGE}", file=sys.stderr)
            raise SystemExit(2)
        return "module", argv[1], [argv[1], *argv[2:]]
    if argv[0].startswith("-"):
        print(f"spmd.run: error: unknown option {argv[0]}; {_USAGE}", file=sys.stderr)
        raise SystemExit(2)
    if not os.path.isfile(argv[0]):
        print(f"spmd.run: error: script {argv[0]!r} not found (working directory "
              f"{os.getcwd()}); pass the path of a Python file", file=sys.stderr)
        raise SystemExit(2)
    return "path", argv[0], list(argv)


def _redirect_output(path: str) -> None:
    """Send fds 1 and 2 to the worker's log; a file, not a pipe, keeps every line even when
    the process is killed."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout.reconfigure(line_buffering=True)


def _prepare_worker(status_file: str) -> None:
    global _stack_file
    # Hydra tells the surviving ranks of a failure with SIGUSR1 when the launcher has it leave
    # the job alone (-disable-auto-cleanup); SIGUSR1's default would kill them before the
    # launcher asks where they were. The launcher stops them.
    if signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    # A crash in C code (SIGSEGV, SIGABRT) leaves its Python traceback in the worker's log.
    faulthandler.enable(file=sys.stderr, all_threads=True)
    _stack_file = open(stack_path(status_file), "w")  # noqa: SIM115 - must outlive this call
    faulthandler.register(STACK_SIGNAL, file=_stack_file, all_threads=True, chain=False)
    # Announced only now: the launcher sends STACK_SIGNAL to the pids it reads here, and before
    # the handler is in place that signal would kill the worker.
    append_event(status_file, "start",
                 f"pid={os.getpid()} supervisor={os.getppid()} host={socket.gethostname()}")


def _fail(code: int, summary: str, status_file: str | None, said: bool = False) -> None:
    """End this rank after an error, making sure every other rank ends too. `said`: the
    rank's failure was reported already (its block, or its one line)."""
    from .guard import abort_job, note_exit_code

    note_exit_code(code)
    if status_file:
        append_event(status_file, "error", summary)
    elif not said:  # the launcher's report names the rank and cause; here this rank says it
        from .comm.topology import launcher_rank_size

        rank, size = launcher_rank_size()
        print(f"spmd.run: [rank {rank}/{size}] {summary}; ending the job", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    if not status_file:
        abort_job(code)
    # No MPI_Finalize: it would wait for ranks that may be stuck in a collective. Under the
    # launcher, the launcher stops them (after asking where they were); otherwise Abort did.
    os._exit(code)


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)  # sys.exit("message"): Python prints it and exits 1
    return 1


def _print_user_traceback(error: BaseException) -> None:
    """The traceback as `python script.py` would print it: without this module's and runpy's
    frames above the script's."""
    tb = error.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>")
                              or "runpy" in os.path.basename(tb.tb_frame.f_code.co_filename)):
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb or error.__traceback__)


def run(kind: str, target: str, argv: list[str], status_file: str | None = None) -> None:
    """Run a script (kind 'path') or module (kind 'module') as __main__ with `argv`; on an
    error, print the traceback and end the job as the module docstring says."""
    sys.argv = argv
    try:
        if kind == "path":
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = _exit_code(e.code)
        if code != 0:
            _fail(code, f"SystemExit: exit code {code}", status_file)
    except BaseException as e:  # noqa: BLE001 - any error of the script ends the job
        from .guard import report_failure, summary

        # the root-cause block and the traceback, or one line for a rank that another's
        # failure stopped (spmd.guard.report_failure)
        error = e
        report_failure(error, lambda: _print_user_traceback(error))
        _fail(1, summary(error), status_file, said=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of `python -m spmd.run`."""
    kind, target, script_argv = _parse(sys.argv[1:] if argv is None else argv)
    from .flags import flags

    settings = flags()
    if settings.worker_log:
        _redirect_output(settings.worker_log)
    if settings.status_file:  # `import spmd` made the supervisor (spmd/guard)
        _prepare_worker(settings.status_file)
    run(kind, target, script_argv, settings.status_file)


if __name__ == "__main__":
    main()
