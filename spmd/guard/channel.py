"""The supervisors' channel: every rank's supervisor keeps one TCP connection to rank 0's, and
tells it when its rank leaves the job; rank 0's passes each departure on to all, and says
`alldone` once every rank has left. A connection that breaks is a departure too: the kernel
closes a socket whatever killed its process, so even SIGKILL is seen at once.

Messages are lines of text (`hello R`, `gone R code=C signal=S collectives=N steps=M how=H`,
`alldone`): no pickle, nothing executed. Rank 0's supervisor listens on every interface, on a
port the kernel picks; the address reaches the others through the program's first MPI use
(see spmd/guard/__init__.py).
"""
from __future__ import annotations

import select
import socket

from .state import FAILED, LOST


def listen() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", 0))
    sock.listen(64)
    return sock


def candidate_addresses(port: int) -> str:
    """Where the other ranks may reach this host: its name, its addresses, then loopback."""
    host = socket.gethostname()
    names = [host]
    try:
        names += [ip for ip in socket.gethostbyname_ex(host)[2] if ip not in names]
    except OSError:
        pass
    names.append("127.0.0.1")
    return ",".join(f"{name}:{port}" for name in names)


def _gone_line(info: dict) -> str:
    return ("gone {rank} code={code} signal={signal} collectives={collectives} steps={steps} "
            "how={how}\n").format(**info)


def _parse_gone(words: list[str]) -> dict:
    info = {"rank": int(words[1])}
    for word in words[2:]:
        key, _, value = word.partition("=")
        info[key] = int(value)
    return info


class _Lines:
    """A socket read as lines."""

    def __init__(self, sock: socket.socket):
        self.sock, self._buf = sock, b""

    def read(self) -> list[str] | None:
        """The complete lines now available; None once the peer closed."""
        try:
            data = self.sock.recv(4096)
        except OSError:
            data = b""
        if not data:
            return None
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        return [line.decode("ascii", "replace") for line in lines]


class Channel:
    """One supervisor's end. `on_departure(info)` is called once per rank that left (not for
    this rank itself); `all_done` turns true when every rank has left."""

    def __init__(self, rank: int, size: int, listener: socket.socket | None, on_departure):
        self.rank, self.size = rank, size
        self._listener = listener  # rank 0 only
        self._on_departure = on_departure
        self._peers: dict[int, _Lines] = {}  # rank 0: rank -> connection
        self._pending: list[_Lines] = []  # rank 0: accepted, not yet said hello
        self._upstream: _Lines | None = None  # other ranks: the connection to rank 0
        self._gone: set[int] = set()
        self._failed: set[int] = set()
        self.all_done = False
        self.connected = rank == 0

    def connect(self, addresses: str, timeout_s: float = 2.0) -> bool:
        """Ranks other than 0: reach rank 0's supervisor at one of `addresses`."""
        for address in addresses.split(","):
            host, _, port = address.rpartition(":")
            try:
                sock = socket.create_connection((host, int(port)), timeout=timeout_s)
            except (OSError, ValueError):
                continue
            sock.settimeout(None)
            sock.sendall(f"hello {self.rank}\n".encode())
            self._upstream = _Lines(sock)
            self.connected = True
            return True
        return False

    def leave(self, info: dict) -> None:
        """This rank left the job (info: code, signal, collectives, steps, how). Once more
        with how=FAILED if it turned out to fail after leaving."""
        info = dict(info, rank=self.rank)
        if self.rank == 0:
            self._gone_seen(info)
        elif self._upstream is not None:
            try:
                self._upstream.sock.sendall(_gone_line(info).encode())
            except OSError:
                pass

    def poll(self, timeout_s: float) -> None:
        """Handle whatever arrives within `timeout_s`."""
        sources = [c.sock for c in (*self._peers.values(), *self._pending)]
        if self._listener is not None:
            sources.append(self._listener)
        if self._upstream is not None:
            sources.append(self._upstream.sock)
        if not sources:
            select.select([], [], [], timeout_s)
            return
        ready, _, _ = select.select(sources, [], [], timeout_s)
        for sock in ready:
            if sock is self._listener:
                conn, _ = sock.accept()
                self._pending.append(_Lines(conn))
            elif self._upstream is not None and sock is self._upstream.sock:
                self._from_rank0()
            else:
                self._from_peer(sock)

    def _from_rank0(self) -> None:
        lines = self._upstream.read()
        if lines is None:  # rank 0's supervisor is gone: the job is over, or failed
            self._upstream = None
            if not self.all_done:
                self._departed({"rank": 0, "code": -1, "signal": 0, "collectives": -1,
                                "steps": -1, "how": LOST})
                self.all_done = True
            return
        for line in lines:
            words = line.split()
            if words[:1] == ["gone"]:
                self._departed(_parse_gone(words))
            elif words[:1] == ["alldone"]:
                self.all_done = True

    def _from_peer(self, sock) -> None:
        lines_of = next((c for c in self._pending if c.sock is sock), None)
        rank = None
        if lines_of is None:
            rank, lines_of = next((r, c) for r, c in self._peers.items() if c.sock is sock)
        lines = lines_of.read()
        if lines is None:
            if lines_of in self._pending:
                self._pending.remove(lines_of)
            else:
                del self._peers[rank]
                self._gone_seen({"rank": rank, "code": -1, "signal": 0, "collectives": -1,
                                 "steps": -1, "how": LOST})
            sock.close()
            return
        for line in lines:
            words = line.split()
            if words[:1] == ["hello"] and lines_of in self._pending:
                self._pending.remove(lines_of)
                rank = int(words[1])
                self._peers[rank] = lines_of
            elif words[:1] == ["gone"]:
                self._gone_seen(_parse_gone(words))

    def _gone_seen(self, info: dict) -> None:
        """Rank 0: a rank left. Passed on once per rank, and once more should it fail after
        leaving; a lost connection after its `gone` changes nothing."""
        failed = info["how"] == FAILED
        if info["rank"] in self._gone and (not failed or info["rank"] in self._failed):
            return
        self._gone.add(info["rank"])
        if failed:
            self._failed.add(info["rank"])
        if info["rank"] != 0:
            self._departed(info)
        line = _gone_line(info).encode()
        done = len(self._gone) == self.size
        for conn in list(self._peers.values()):
            try:
                conn.sock.sendall(line + (b"alldone\n" if done else b""))
            except OSError:
                pass
        self.all_done = done

    def _departed(self, info: dict) -> None:
        if info["rank"] != self.rank:
            self._on_departure(info)

    def close(self) -> None:
        """Close every connection of this end, as the kernel does when its process dies."""
        for conn in (*self._peers.values(), *self._pending,
                     *([self._upstream] if self._upstream else [])):
            conn.sock.close()
        self._peers, self._pending, self._upstream = {}, [], None
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    @property
    def peers_connected(self) -> int:
        """Rank 0: how many other ranks' supervisors said hello."""
        return len(self._peers)
