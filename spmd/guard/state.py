"""What a rank's program and its supervisor share: a few int64 slots and a short text, in an
anonymous shared mapping made before the fork, so the supervisor still reads them after the
program died by a signal or os._exit.

One writer per slot: the program writes its progress and its exit; the supervisor writes the
first departure of a peer it heard of. Plain stores, read by polling; a sequence slot is
written last, so a reader that sees it also sees the record it guards. Setting the address
also wakes the supervisor, which waits for it before it can join the channel.
"""
from __future__ import annotations

import mmap
import os
import select
import time

# slots written by the program (MPI_STARTED: it began to start MPI, so its supervisor never
# stands in for it; FAILING: an uncaught error is being reported; the ERROR text says which)
COLLECTIVES, STEPS, LEAVING, EXIT_CODE, ADDRESS_READY, CHANNEL, MPI_STARTED, FAILING = range(8)
MPI_START_FAILED = 24  # the program: MPI start-up timed out (a peer never started MPI)
# the program is about to MPI_Abort the job (ABORTING, with ABORT_CODE): its supervisor tells
# the others first (ABORT_TOLD when it has), whose supervisors then print each rank's "stopped"
# line before the abort kills them all; STOP_SAID: that line was printed (by either process)
ABORTING, ABORT_TOLD, STOP_SAID, ABORT_CODE = range(25, 29)
# the program: it is in the job's MPI start-up (spmd's first MPI use, until the supervisors'
# channel is decided); dying then, its supervisor tells the node's others (early_news.py)
STARTING = 29
# slots written by the supervisor: the first peer that left, while this program ran; and the
# earliest failure heard of, by (collective count, rank): the job's root cause
(DEPARTED, D_RANK, D_CODE, D_SIGNAL, D_COLLECTIVES, D_STEPS, D_HOW, CONNECTED,
 LISTEN_PORT, F_SEEN, F_RANK, F_COLLECTIVES, F_CODE, F_SIGNAL) = range(8, 22)
_SLOTS = 32
# rank 0's address text when its supervisor has no listener: the reason follows (here, not in
# channel.py, so the other ranks read it without importing the channel's sockets)
NO_ADDRESS_MARK = "!"
_TEXT = 256  # the rendezvous address, "host:port,host:port,..."
_ERROR = 512  # the program's error, one line, for its supervisor to tell

# how a rank left (D_HOW)
LOST, SCRIPT_ENDED, EXITED_UNCLEANLY, FAILED = range(4)
HOW = {LOST: "(its supervisor's connection broke: the whole process was killed)",
       SCRIPT_ENDED: "(its script ended: the end of the script or sys.exit)",
       EXITED_UNCLEANLY: "(it ended without Python's exit: os._exit, or a crash in C code)",
       FAILED: "(it failed)"}


class SharedState:
    """The slots, as a view of 64-bit ints, and the address text. No numpy: it is made before
    the fork, and whatever the process holds then, the program's child and its supervisor
    copy page by page as they touch it (with numpy imported before the fork, a supervised
    rank's `import spmd.fluid` took 54 ms, against 30 ms unsupervised)."""

    def __init__(self, shared: bool = True):
        size = _SLOTS * 8 + _TEXT + _ERROR
        # MAP_SHARED: the fork keeps one copy both processes see; in-process use needs none.
        # An anonymous mapping starts zeroed.
        self._map = mmap.mmap(-1, size, flags=mmap.MAP_SHARED if shared else mmap.MAP_PRIVATE)
        self.slots = memoryview(self._map)[:_SLOTS * 8].cast("q")  # aligned 8-byte stores
        self.slots[EXIT_CODE] = -1
        # the program writes a byte here when it sets the address: a supervisor waiting for
        # it wakes at once instead of at its next poll (the job's first collective waits)
        self._wake = os.pipe() if shared else None

    def _put(self, offset: int, length: int, text: str) -> None:
        raw = text.encode()[:length - 1]
        self._map[offset:offset + length] = raw + bytes(length - len(raw))

    def _get(self, offset: int, length: int) -> bytes:
        raw = self._map[offset:offset + length]
        return raw[:raw.index(0)] if 0 in raw else raw

    def set_address(self, text: str) -> None:
        self._put(_SLOTS * 8, _TEXT, text)
        self.slots[ADDRESS_READY] = 1
        if self._wake is not None:
            os.write(self._wake[1], b"!")

    def wait_for_address(self, timeout_s: float) -> None:
        """The supervisor: return when the address is set, or after `timeout_s`."""
        if self.slots[ADDRESS_READY]:
            return
        if self._wake is None:
            time.sleep(timeout_s)
        elif select.select([self._wake[0]], [], [], timeout_s)[0]:
            os.read(self._wake[0], 64)

    def address(self) -> str:
        return self._get(_SLOTS * 8, _TEXT).decode()

    def set_error(self, text: str) -> None:
        """The program: the one line that says why it fails (before FAILING is set)."""
        self._put(_SLOTS * 8 + _TEXT, _ERROR, text)

    def error(self) -> str:
        return self._get(_SLOTS * 8 + _TEXT, _ERROR).decode(errors="replace")

    def record_failure(self, rank: int, collectives: int, code: int, sig: int) -> None:
        """A peer failed: kept when it is the earliest heard of, by (collectives, rank)."""
        s = self.slots
        if s[F_SEEN] and (int(s[F_COLLECTIVES]), int(s[F_RANK])) <= (collectives, rank):
            return
        s[F_RANK], s[F_COLLECTIVES], s[F_CODE], s[F_SIGNAL] = rank, collectives, code, sig
        s[F_SEEN] = 1

    def earliest_failure(self) -> dict | None:
        s = self.slots
        if not s[F_SEEN]:
            return None
        return {"rank": int(s[F_RANK]), "collectives": int(s[F_COLLECTIVES]),
                "code": int(s[F_CODE]), "signal": int(s[F_SIGNAL])}

    def record_departure(self, rank: int, code: int, sig: int, collectives: int, steps: int,
                         how: int) -> None:
        """The first departure only: it is the one that explains the failure."""
        if self.slots[DEPARTED]:
            return
        s = self.slots
        s[D_RANK], s[D_CODE], s[D_SIGNAL] = rank, code, sig
        s[D_COLLECTIVES], s[D_STEPS], s[D_HOW] = collectives, steps, how
        s[DEPARTED] = 1

    def departure(self) -> dict | None:
        s = self.slots
        if not s[DEPARTED]:
            return None
        return {"rank": int(s[D_RANK]), "code": int(s[D_CODE]), "signal": int(s[D_SIGNAL]),
                "collectives": int(s[D_COLLECTIVES]), "steps": int(s[D_STEPS]),
                "how": int(s[D_HOW])}
