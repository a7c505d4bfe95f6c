"""The supervisors' channel: every rank's supervisor keeps one TCP connection to rank 0's, and
tells it when its rank leaves the job; rank 0's passes each departure on to all, and says
`alldone` once every rank has left. A connection that breaks is a departure too: the kernel
closes a socket whatever killed its process, so even SIGKILL is seen at once.

Only this job's supervisors get in: a connection opens with the job-token hello
(spmd.job_token: SPMD_JOB_TOKEN, which paddle-launch sets for every job; without it rank 0's
supervisor makes one and it travels with the address over MPI), checked before anything else is
read; garbage, a truncated hello or another job's token is refused, logged and closed, and
never counts as a rank. Then lines of text (`hello R`, `gone R code=C signal=S collectives=N
steps=M how=H`, `alldone`): no pickle, nothing executed.

Rank 0's supervisor listens only where the job can reach it, never on every interface: on
loopback when the process manager says every rank runs on this node, else on the node's own
address (POD_IP, the host of PADDLE_CURRENT_ENDPOINT, or the node name the process manager
gave, spmd/launcher_vars.py's NODE_NAME_VARS, when it is an address of this machine); on a port
the kernel picks. A job over several nodes where none of them names this node's address gets
no listener: the job fails at its first MPI use, saying what to set (no_address_reason). The
address reaches the others through the program's first MPI use (see spmd/guard/__init__.py).
"""
from __future__ import annotations

# The channel's sockets are the _socket module's alone: socket.py (its enums, selectors) costs
# milliseconds of CPU in every process that imports it, and the supervisors run beside their
# programs while those start. It is imported only to find this node's address for other
# nodes (interface_addresses, _resolved).
import _socket
import os
import select
import time

from ..job_token import (
    HELLO_DEADLINE_S,
    HELLO_LEN,
    MAGIC,
    check_hello,
    hello,
    job_token,
    log_refused,
    new_token,
)
from .state import FAILED, LOST, NO_ADDRESS_MARK  # noqa: F401 - read here by its users too

_TOKEN_MARK = ";token="
_token: str | None = None  # rank 0: made by listen() when SPMD_JOB_TOKEN is not set
_bound: str = "127.0.0.1"


class NodeAddressUnknown(OSError):
    """Rank 0's supervisor cannot tell where the other nodes reach it (no_address_reason)."""


def interface_addresses() -> list[str]:
    """The IPv4 address of each interface of this machine but loopback (Linux)."""
    import socket

    try:
        import fcntl
        import struct
    except ImportError:
        return []
    found = []
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(probe.fileno(), 0x8915,  # SIOCGIFADDR
                                     struct.pack("256s", name[:15].encode()))
            except OSError:
                continue  # no IPv4 address
            ip = socket.inet_ntoa(packed[20:24])
            if not ip.startswith("127.") and ip not in found:
                found.append(ip)
    finally:
        probe.close()
    return found


def _resolved(name: str) -> list[str]:
    """IPv4 addresses of host `name` (itself when it is one); [] when it does not resolve."""
    import socket

    try:
        socket.inet_aton(name)
        return [name] if name.count(".") == 3 else []
    except OSError:
        pass
    try:
        return socket.gethostbyname_ex(name)[2]
    except OSError:
        return []


def _own_address(env) -> str | None:
    """This node's address as the job names it, when this machine has it: POD_IP, the host of
    PADDLE_CURRENT_ENDPOINT (loopback too: every trainer is then on this machine), then the
    node names of the process manager (never a loopback address they resolve to, as a
    Debian host name does to 127.0.1.1: the other nodes could not reach it)."""
    from ..launcher_vars import node_names

    mine = set(interface_addresses())
    endpoint_host = env.get("PADDLE_CURRENT_ENDPOINT", "").rpartition(":")[0]
    for name in (env.get("POD_IP", ""), "127.0.0.1" if endpoint_host == "localhost" else
                 endpoint_host):
        if name and (name in mine or name.startswith("127.")):
            return name
    for name in node_names(env):
        for ip in _resolved(name):
            if ip in mine:
                return ip
    return None


def no_address_reason(env=None) -> str:
    """Why rank 0's supervisor has no listener, and what to set."""
    from ..launcher_vars import NODE_NAME_VARS, local_size, world_size

    env = os.environ if env is None else env
    here, size = local_size(env), world_size(env)
    spread = (f"this job spans several nodes ({size} ranks, {here} of them on this one)"
              if here and size else "the process manager does not say that every rank of the "
              "job runs on this node")
    named = ", ".join(f"{n}={env[n]}" for n in ("POD_IP", "PADDLE_CURRENT_ENDPOINT",
                                                *NODE_NAME_VARS) if env.get(n))
    return (f"rank 0's supervisor (spmd's guard: how a rank that ends early is told to the "
            f"others) has no address to listen on: {spread}, and nothing names this node's "
            f"address on the network the nodes share"
            + (f" ({named}: not an address of this machine)" if named else "")
            + ". Set POD_IP=<this node's address> in the ranks' environment (on rank 0's node "
            "at least), give the process manager the nodes by address or by names that resolve "
            "to them (mpiexec -hosts / a host file: PMI_HOSTNAME), or start the job with "
            "paddle-launch (it sets PADDLE_CURRENT_ENDPOINT); SPMD_SUPERVISE=0 runs without the "
            "guard (a rank that ends early is then noticed only by SPMD_COLLECTIVE_TIMEOUT)")


def _all_ranks_here(env) -> bool:
    """Whether the process manager says every rank runs on this node (Hydra, Open MPI,
    SLURM's local and global counts)."""
    if env.get("SPMD_JOIN_START") == "1":  # joined without a launcher: its counts are its own
        return False
    from ..launcher_vars import one_node

    return one_node(env)


def listen_address(env=None) -> str:
    """Where rank 0's supervisor listens (see the module's doc); raises NodeAddressUnknown."""
    env = os.environ if env is None else env
    if _all_ranks_here(env):
        return "127.0.0.1"
    address = _own_address(env)
    if address is None:
        raise NodeAddressUnknown(no_address_reason(env))
    return address


def listen(env=None) -> _socket.socket:
    """Rank 0's listening socket (see the module's doc; a bare _socket.socket: Channel takes
    it as it is); raises NodeAddressUnknown."""
    global _token, _bound
    env = os.environ if env is None else env
    _bound = listen_address(env)
    _token = job_token(env) or new_token()
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    sock.bind((_bound, 0))
    sock.listen(64)
    return sock


def candidate_addresses(port: int, env=None) -> str:
    """Where the other ranks reach rank 0's supervisor (the one address it listens on) and,
    when the job has no SPMD_JOB_TOKEN, the token rank 0's made: `host:port[;token=T]`.
    (Its readers take a list, `host:port,host:port`, as earlier versions offered.)"""
    env = os.environ if env is None else env
    text = f"{_bound}:{port}"  # the one address it listens on
    if _token is not None and _token != job_token(env):
        text += _TOKEN_MARK + _token  # travels over MPI, the job's own channel
    return text


def _split_token(addresses: str, env=None) -> tuple[str, str]:
    addresses, _, token = addresses.partition(_TOKEN_MARK)
    return addresses, token or job_token(os.environ if env is None else env) or ""


def _gone_line(info: dict) -> str:
    """`aborting=1`: the rank fails and is about to MPI_Abort the job (everyone is killed)."""
    return ("gone {rank} code={code} signal={signal} collectives={collectives} steps={steps} "
            "how={how}").format(**info) + (" aborting=1" if info.get("aborting") else "") + "\n"


def _parse_gone(words: list[str]) -> dict:
    info = {"rank": int(words[1])}
    for word in words[2:]:
        key, _, value = word.partition("=")
        info[key] = int(value)
    return info


def _accept(listener) -> _socket.socket:
    """A connection to `listener`: listen()'s bare _socket.socket has no accept(), only the
    accept of the file descriptor that socket.socket's own accept() wraps the same way."""
    if hasattr(listener, "accept"):  # a socket.socket
        return listener.accept()[0]
    fd, _ = listener._accept()
    return _socket.socket(listener.family, listener.type, listener.proto, fileno=fd)


def _connection(host: str, port: int, timeout_s: float) -> _socket.socket:
    """A blocking TCP connection to (host, port), tried at each address it resolves to within
    `timeout_s` each (socket.create_connection's steps, with _socket alone)."""
    error: OSError = OSError(f"{host}:{port} resolves to no address")
    for family, kind, proto, _, address in _socket.getaddrinfo(host, port, 0,
                                                               _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout_s)
            sock.connect(address)
            sock.settimeout(None)
            return sock
        except OSError as e:
            sock.close()
            error = e
    raise error


class _Lines:
    """A socket read as lines; on rank 0, the peer's job-token hello first."""

    def __init__(self, sock: _socket.socket, token: str | None = None):
        self.sock, self._buf = sock, b""
        self.token = token  # rank 0: the hello still to check; None once checked
        self.since = time.monotonic()

    def read(self) -> list[str] | None:
        """The complete lines now available; None once the peer closed (or, before its
        hello passed, sent something else: `self.refused` says what)."""
        try:
            data = self.sock.recv(4096)
        except OSError:
            data = b""
        if not data:
            if self.token is not None:
                self.refused = check_hello(self._buf, self.token, "channel")
            return None
        self._buf += data
        if self.token is not None:
            if not MAGIC.startswith(self._buf[:len(MAGIC)]) or len(self._buf) >= HELLO_LEN:
                self.refused = check_hello(self._buf[:HELLO_LEN], self.token, "channel")
                if self.refused:
                    return None
                self.token, self._buf = None, self._buf[HELLO_LEN:]
            else:
                return []  # the hello is not complete yet
        *lines, self._buf = self._buf.split(b"\n")
        return [line.decode("ascii", "replace") for line in lines]

    refused = ""


class Channel:
    """One supervisor's end. `on_departure(info)` is called once per rank that left (not for
    this rank itself); `all_done` turns true when every rank has left."""

    def __init__(self, rank: int, size: int, listener: _socket.socket | None, on_departure):
        self.rank, self.size = rank, size
        self._token = _token or job_token() or ""  # rank 0; the others' comes with the address
        self.refused = 0  # rank 0: connections refused (not this job's)
        self._listener = listener  # rank 0 only
        self._on_departure = on_departure
        self._peers: dict[int, _Lines] = {}  # rank 0: rank -> connection
        self._pending: list[_Lines] = []  # rank 0: accepted, not yet said hello
        self._upstream: _Lines | None = None  # other ranks: the connection to rank 0
        self._gone: set[int] = set()
        self._aborting: set[int] = set()  # rank 0: ranks that said they abort the job
        self._failed: set[int] = set()
        self.all_done = False
        self.connected = rank == 0

    def connect(self, addresses: str, timeout_s: float = 2.0) -> bool:
        """Ranks other than 0: reach rank 0's supervisor at one of `addresses`."""
        addresses, token = _split_token(addresses)
        for address in addresses.split(","):
            host, _, port = address.rpartition(":")
            try:
                sock = _connection(host, int(port), timeout_s)
                sock.sendall(hello(token, "channel") + f"hello {self.rank}\n".encode())
            except (OSError, ValueError):
                continue
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
                try:
                    conn = _accept(sock)
                except OSError:
                    continue
                self._pending.append(_Lines(conn, self._token))
            elif self._upstream is not None and sock is self._upstream.sock:
                self._from_rank0()
            else:
                self._from_peer(sock)
        self._drop_silent_pending()

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
            rank, lines_of = next(((r, c) for r, c in self._peers.items() if c.sock is sock),
                                  (None, None))
            if lines_of is None:  # closed earlier in this round (a refused connection)
                return
        lines = lines_of.read()
        if lines is None:
            if lines_of in self._pending:
                self._pending.remove(lines_of)
                if lines_of.token is not None:  # it never proved it is of this job
                    self._refuse(lines_of, lines_of.refused or "closed before its hello")
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
                rank = int(words[1]) if len(words) == 2 and words[1].isdigit() else -1
                if not 0 < rank < self.size or rank in self._peers:
                    self._refuse(lines_of, f"a bad hello line {line[:40]!r}")
                    sock.close()
                    return
                self._peers[rank] = lines_of
            elif words[:1] == ["gone"]:
                self._gone_seen(_parse_gone(words))

    def _refuse(self, conn: _Lines, why: str) -> None:
        self.refused += 1
        try:
            peer = conn.sock.getpeername()
        except OSError:
            peer = "a peer"
        log_refused("the supervisors' channel", peer, why)
        conn.sock.close()

    def _drop_silent_pending(self) -> None:
        """A connection that has not said a whole hello in time is dropped: it cannot stall
        the channel, nor hold a slot."""
        now = time.monotonic()
        for conn in [c for c in self._pending if c.token is not None
                     and now - c.since > HELLO_DEADLINE_S]:
            self._pending.remove(conn)
            self._refuse(conn, f"no whole hello within {HELLO_DEADLINE_S:g} s")

    def _gone_seen(self, info: dict) -> None:
        """Rank 0: a rank left. Passed on once per rank, and once more should it fail after
        leaving; a lost connection after its `gone` changes nothing."""
        failed = info["how"] == FAILED
        if info["rank"] in self._gone and (not failed or info["rank"] in self._failed):
            return
        if info.get("aborting"):  # news before its end (the abort ends every rank), once
            if info["rank"] in self._aborting:
                return
            self._aborting.add(info["rank"])
        else:
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
