"""What comm, the guard and the profiler tell each other without importing each other: the one
module below all three. The order is one way: comm imports neither the guard nor the profiler;
the guard (spmd/guard) and the profiler (spmd/profiler.py) may import comm; each may import
this (tests/unit/test_layering.py keeps it so).

- `supervision`: the rank's guard, which comm tells of its MPI start and of each collective and
  asks about departed peers. `NoSupervision` (the interface, doing nothing) until spmd.guard
  installs itself with `supervise_with` at `import spmd`.
- `profiling.recorder`: the profiler's Recorder while fluid.profiler profiles, else None
  (`profiler_recorder()` asks the same). A collective reads the attribute: when profiling is
  off that read is its whole cost, no call.
- `StoppedByPeer`: the error of a rank that stops because another failed.
"""
from __future__ import annotations

from .errors import CommunicationError


class StoppedByPeer(CommunicationError):
    """This rank stops because another rank failed (or ended before the job started): that
    rank prints the cause; this one says it was stopped, in one line."""


class NoSupervision:
    """What comm asks of a supervision, answered for a process that has none."""

    @staticmethod
    def note_mpi_starting() -> None:
        """The program is about to start MPI."""

    @staticmethod
    def note_job_start(starting: bool) -> None:
        """The program enters (True) or leaves (False) the job's MPI start-up."""

    @staticmethod
    def rendezvous(comm) -> None:
        """At the first MPI use, over the mpi4py communicator `comm`."""

    @staticmethod
    def note_mpi_start_failed() -> None:
        """MPI start-up timed out or was stopped: the process ends at once."""

    @staticmethod
    def peer_died_in_start() -> str | None:
        """While the job's MPI start-up waits: the line naming a peer that died in it."""
        return None

    @staticmethod
    def note_collective() -> int:
        """Count a collective this rank enters; its number (0 when not counted)."""
        return 0

    @staticmethod
    def departure_message(op: str, tag: str) -> str | None:
        """When a peer left before joining the current collective `op`: what to say."""
        return None

    @staticmethod
    def let_the_reporter_speak() -> None:
        """Before failing for a departure: give the reporting rank a moment."""

    @staticmethod
    def steps() -> int:
        """How many Executor.run calls this process started."""
        return 0

    @staticmethod
    def supervised() -> bool:
        """Whether a supervisor's channel tells this rank of departures."""
        return False

    @staticmethod
    def abort_job(code: int) -> None:
        """End the whole job (MPI_Abort) where there is one to end."""


supervision = NoSupervision()


def supervise_with(implementation) -> None:
    """Make `implementation` (an object with NoSupervision's functions) the supervision."""
    global supervision
    supervision = implementation


class _Profiling:
    __slots__ = ("recorder",)

    def __init__(self):
        self.recorder = None


profiling = _Profiling()


def profiler_recorder():
    """The profiler's Recorder while profiling, else None."""
    return profiling.recorder
