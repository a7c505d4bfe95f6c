"""News of a rank that died in the job's MPI start-up, for the supervisors on its node.

The supervisors' channel (spmd/guard/channel.py) is made at spmd's first MPI use: rank 0's
address travels over MPI. A program that dies while it starts MPI (inside MPI_Init, or before
the address came) leaves a gap: its supervisor cannot stand in for it (the program already
spoke on the process manager's PMI connection, which the two share, and the other ranks may
hold its business card), and the others wait for it in MPI start-up until the collective
timeout, blaming no one. Hydra ends the job when one of its processes is killed, but with
SIGKILL for every other rank, which then cannot say why.

So every supervisor also listens, from its start, on a node-local datagram socket in Linux's
abstract namespace, named after the process that started the ranks of this node (the process
manager's proxy: Hydra's hydra_pmi_proxy, slurmstepd) and the rank; the supervisor that saw
its program die in start-up sends one line of JSON to each rank of the node, and then ends the
job. A datagram is accepted only from a sibling process (same parent, same user: the kernel's
SCM_CREDENTIALS, checked against /proc), so no other job or user gets in. No pickle.

Ranks on other nodes are not told this way: Hydra's end of the job stops them (its own
"BAD TERMINATION" message names the process that was killed).
"""
from __future__ import annotations

import _socket  # not socket.py: its enums cost milliseconds of every rank's start-up
import os
import select
import struct

_MAGIC = b"SPMD-EARLY-1 "
_MAX = 4096


def _name(parent: int, rank: int) -> bytes:
    return f"\0spmd-early-{os.getuid()}-{parent}-{rank}".encode()


class EarlyNews:
    """One supervisor's end: `tell` its program's death to the node's other ranks, `poll` for
    theirs. Best effort: where the socket cannot be made, it tells and hears nothing."""

    def __init__(self, rank: int, size: int):
        self.rank, self.size = rank, size
        self.parent = os.getppid()
        self.sock: _socket.socket | None = None
        try:
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
            sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_PASSCRED, 1)
            sock.bind(_name(self.parent, rank))
            sock.setblocking(False)
            self.sock = sock
        except (OSError, AttributeError):  # not Linux, or the name is taken
            pass

    def tell(self, record: dict, ranks) -> set:
        """Send `record` to each of `ranks` on this node; the ranks it reached."""
        if self.sock is None:
            return set()
        import json  # (only when a program died)

        data = _MAGIC + json.dumps(record).encode()
        reached = set()
        for r in ranks:
            try:
                self.sock.sendto(data, _name(self.parent, r))
                reached.add(r)
            except OSError:  # not on this node, or its supervisor not started yet
                pass
        return reached

    def poll(self, timeout_s: float = 0.0) -> list[dict]:
        """The records received from siblings, waiting up to `timeout_s` for the first."""
        if self.sock is None:
            return []
        if timeout_s > 0 and not select.select([self.sock], [], [], timeout_s)[0]:
            return []
        found = []
        while True:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(_MAX, _socket.CMSG_SPACE(12))
            except (BlockingIOError, InterruptedError):
                return found
            except OSError:
                return found
            record = self._accepted(data, ancillary)
            if record is not None:
                found.append(record)

    def _accepted(self, data: bytes, ancillary) -> dict | None:
        sender = None
        for level, kind, raw in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_CREDENTIALS and len(raw) >= 12:
                sender = struct.unpack("iII", raw[:12])
        if sender is None or sender[1] != os.getuid() or _parent_of(sender[0]) != self.parent:
            return None  # not a sibling of this supervisor: not this job's
        if not data.startswith(_MAGIC):
            return None
        import json

        try:
            record = json.loads(data[len(_MAGIC):])
        except ValueError:
            return None
        keys = {"rank": int, "size": int, "code": int, "signal": int, "error": str}
        if not isinstance(record, dict) or any(not isinstance(record.get(k), t)
                                               for k, t in keys.items()):
            return None
        if record["size"] != self.size or not 0 <= record["rank"] < self.size or \
                record["rank"] == self.rank:
            return None
        return record

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
