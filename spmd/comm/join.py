"""Processes started without a launcher, with fluid's PADDLE_* trainer variables only, join one
MPI world: fluid's own launcher, paddle-operator and PaddleCloud pods, Paddle 1.x's test
harness start trainers so (PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS,
PADDLE_CURRENT_ENDPOINT, and no MPI launcher).

1. At `import spmd` such a process re-executes itself under its own `mpiexec -n 1` (MPICH's
   singleton MPI_Comm_connect fails between two plain processes, pmodels/mpich#7805; each
   under its own process manager it works). SPMD_JOIN_START=1 marks the re-executed process.
2. At spmd's first MPI use, trainer 0 listens on its PADDLE_CURRENT_ENDPOINT (that address
   only) and waits for every other trainer's hello (spmd/comm/join_point.py: the job token
   first); trainer 0's join timeout names the trainers that never came.
3. Then one joiner at a time, in trainer-id order: trainer 0 sends it an MPI port, the world
   so far accepts (collectively) and the joiner connects; the intercommunicator is merged
   with the joiner last, so rank = trainer id. The result is spmd's world (comm/mpi.py).

A trainer whose program ended before it joined is announced by its supervisor
(spmd/guard/stand_in.py): trainer 0 then fails the job at once, naming it and its cause.
"""
from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time

from . import join_point as jp
from .join_mark import MARK, joined_start  # noqa: F401 - joined_start: join's API too

_CONNECT_RETRY_S = 0.2
_HELLO_WAIT_S = 3.0  # a connection that has not said a whole hello by then is refused


class JoinError(RuntimeError):
    """The trainers could not form one world; the message says which and why."""


def _ints(env, *names):
    try:
        return [int(env.get(n, "")) for n in names]
    except ValueError:
        return None


def env_only_start(env=None) -> bool:
    """Whether this process carries fluid's collective trainer variables for a job of more than
    one trainer and no MPI launcher started it (a pserver job's trainers are not one: they
    never meet in collectives)."""
    from ..flags import flags
    from ..launcher_vars import launched_by_mpi

    env = os.environ if env is None else env
    if launched_by_mpi(env) or env.get(MARK) or not flags(env).env_start:
        return False
    if env.get("PADDLE_PSERVERS_IP_PORT_LIST") or env.get("PADDLE_PSERVER_ENDPOINTS") or \
            env.get("PADDLE_TRAINING_ROLE", "TRAINER").upper() == "PSERVER":
        return False
    ids = _ints(env, "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM")
    endpoints = [e for e in env.get("PADDLE_TRAINER_ENDPOINTS", "").split(",") if e]
    return ids is not None and ids[1] > 1 and len(endpoints) == ids[1] and \
        bool(env.get("PADDLE_CURRENT_ENDPOINT"))


def trainer_rank_size(env=None) -> tuple[int, int]:
    env = os.environ if env is None else env
    return int(env["PADDLE_TRAINER_ID"]), int(env["PADDLE_TRAINERS_NUM"])


def _mpiexec() -> str:
    """MPICH's mpiexec for the MPI mpi4py loads, looked for as paddle-launch looks (beside this
    Python, where `pip install mpich` puts it; beside the library; on PATH), without importing
    launch (spmd imports nothing of it: the launcher imports spmd)."""
    import shutil

    from ..launcher_vars import loaded_libmpi

    dirs, why = [os.path.dirname(sys.executable)], ""
    try:
        import mpi4py

        initialize, mpi4py.rc.initialize = mpi4py.rc.initialize, False
        try:
            from mpi4py import MPI  # noqa: F401  (loads the library; MPI is not started)
        finally:
            mpi4py.rc.initialize = initialize
        library = loaded_libmpi()
        if library:
            dirs.append(os.path.join(os.path.dirname(os.path.dirname(library)), "bin"))
    except Exception as e:  # noqa: BLE001 - said below, with what to do
        why = f" (mpi4py: {e})"
    for path in (os.path.join(d, n) for d in dirs for n in ("mpiexec", "mpiexec.hydra")):
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("mpiexec")
    if found:
        return found
    raise JoinError(
        f"a trainer started with PADDLE_* variables only joins the others through MPI, but no "
        f"MPI process manager was found (looked in {', '.join(dirs)} and on PATH){why}; "
        f"`pip install mpi4py mpich`")


def reexec_under_mpiexec() -> None:
    """Replace this process by `mpiexec -n 1 <this very command line>` (same pid, so whoever
    started it still waits for it and signals it); returns only when it cannot."""
    with open("/proc/self/cmdline", "rb") as f:
        argv = [a.decode(errors="surrogateescape") for a in f.read().split(b"\0") if a]
    if not argv:
        return
    launcher = _mpiexec()
    os.environ[MARK] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(launcher, [launcher, "-n", "1", *argv])


def join_for_transpile(trainer_id: int, endpoints: list, current_endpoint: str | None) -> None:
    """DistributeTranspiler in nccl2 mode told the trainers only by its arguments, with no
    launcher and no PADDLE_* variables (Paddle 1.x's test_dist_base.py starts CPU trainers
    so): take them as the PADDLE_* variables and re-execute as an env-only trainer. The
    script then starts again from its beginning, under its own mpiexec, and joins the others
    at trainer 0's endpoint. Returns when there is nothing to join (one trainer, an MPI
    launcher, MPI already started, or already joined)."""
    from ..launcher_vars import launched_by_mpi

    env = os.environ
    if len(endpoints) < 2 or launched_by_mpi(env) or joined_start(env) or \
            "mpi4py.MPI" in sys.modules or "PADDLE_TRAINERS_NUM" in env:
        return
    trainer_vars = {"PADDLE_TRAINER_ID": str(trainer_id),
                    "PADDLE_TRAINERS_NUM": str(len(endpoints)),
                    "PADDLE_TRAINER_ENDPOINTS": ",".join(endpoints),
                    "PADDLE_CURRENT_ENDPOINT": current_endpoint or endpoints[trainer_id]}
    # the process's environment changes only when it re-executes: otherwise (SPMD_ENV_START=0)
    # the caller's transpile reports the disagreeing world and later code sees no trainer vars
    if env_only_start({**env, **trainer_vars}):
        env.update(trainer_vars)
        reexec_under_mpiexec()


def _endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit():
        raise JoinError(f"endpoint {text!r} is not host:port (PADDLE_TRAINER_ENDPOINTS)")
    return host, int(port)


class Spec:
    """This trainer's part in the join, from its environment."""

    def __init__(self, env=None):
        from ..flags import flags

        env = os.environ if env is None else env
        self.trainer, self.trainers = trainer_rank_size(env)
        self.endpoints = [e for e in env.get("PADDLE_TRAINER_ENDPOINTS", "").split(",") if e]
        self.root = _endpoint(self.endpoints[0])
        self.key, self.secret = jp.job_key(env)
        self.timeout_s = flags(env).join_timeout_s
        self.tag = f"[rank {self.trainer}/{self.trainers}]"

    def where(self) -> str:
        return f"{self.root[0]}:{self.root[1]}"


def _log(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def listen_at(host: str, port: int) -> socket.socket:
    """A listener on the endpoint's own address (not every interface)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((socket.gethostbyname(host), port))
    except OSError as e:
        sock.close()
        raise JoinError(
            f"trainer 0 cannot listen on its endpoint {host}:{port} ({e}): the port is taken "
            f"or the address is not this host's; give trainer 0 a free host:port in "
            f"PADDLE_TRAINER_ENDPOINTS") from None
    sock.listen(64)
    return sock


class _Pending:
    """An accepted connection that has not yet said a whole hello."""

    def __init__(self, sock: socket.socket, peer, now: float):
        self.sock, self.peer, self.since = sock, peer, now
        self.nonce = jp.new_nonce()
        self.buf = b""
        self.hello: jp.Hello | None = None
        sock.setblocking(False)
        try:
            sock.sendall(self.nonce)
        except OSError:
            pass


class Gathering:
    """Trainer 0's side before the MPI joins: every other trainer's authenticated hello, or
    why the job cannot start. `on_refused(text)` logs each connection turned away."""

    def __init__(self, spec: Spec, listener: socket.socket, on_refused=_log):
        self.spec, self.listener, self.on_refused = spec, listener, on_refused
        self.pending: list[_Pending] = []
        self.joiners: dict[int, _Pending] = {}
        self.absent: dict[int, str] = {}  # trainer -> what its supervisor said of its end
        self.answered: set[int] = set()  # trainers dealt with already (trainer 0's stand-in)

    def _refuse(self, p: _Pending, why: str) -> None:
        self.on_refused(f"{self.spec.tag} join point {self.spec.where()}: refused a "
                        f"connection from {p.peer[0]}:{p.peer[1]}: {why}")
        self._drop(p)

    def _drop(self, p: _Pending) -> None:
        if p in self.pending:
            self.pending.remove(p)
        try:
            p.sock.close()
        except OSError:
            pass

    def _read(self, p: _Pending) -> None:
        try:
            data = p.sock.recv(jp.HELLO + jp.MAX_TEXT)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._refuse(p, f"it closed after {len(p.buf)} byte(s), before a whole hello")
            return
        p.buf += data
        if p.hello is None and len(p.buf) >= jp.HELLO:
            p.hello = jp.check_hello(self.spec.key, p.nonce, p.buf[:jp.HELLO])
            if p.hello is None:
                self._refuse(p, "not this job's hello (another job's token, or not spmd); "
                                "every trainer needs the same SPMD_JOB_TOKEN")
                return
        if p.hello is not None and len(p.buf) >= jp.HELLO + p.hello.text_length:
            p.hello.text = p.buf[jp.HELLO:jp.HELLO + p.hello.text_length].decode(
                errors="replace")
            self._admit(p)

    def _admit(self, p: _Pending) -> None:
        h, n = p.hello, self.spec.trainers
        if h.trainers != n or not 0 < h.trainer < n:
            self._refuse(p, f"trainer {h.trainer} of {h.trainers}, but this job has trainers "
                            f"1..{n - 1} of {n}")
            return
        if h.trainer in self.joiners or h.trainer in self.absent or h.trainer in self.answered:
            self._refuse(p, f"trainer {h.trainer} has already joined")
            return
        self.pending.remove(p)
        if h.state == jp.HERE:
            self.joiners[h.trainer] = p
        else:
            self.absent[h.trainer] = h.text or f"exit status {h.state}"
            p.sock.close()

    def missing(self) -> list[int]:
        return [t for t in range(1, self.spec.trainers) if t not in self.joiners
                and t not in self.absent and t not in self.answered]

    def run(self, deadline: float) -> None:
        """Until every trainer said hello, one is known to have ended, or `deadline`."""
        while self.missing() and not self.absent:
            now = time.monotonic()
            if now >= deadline:
                return
            for p in [p for p in self.pending if now - p.since > _HELLO_WAIT_S]:
                self._refuse(p, f"no whole hello within {_HELLO_WAIT_S:g} s "
                                f"({len(p.buf)} byte(s))")
            socks = [self.listener] + [p.sock for p in self.pending]
            ready = select.select(socks, [], [], min(0.2, deadline - now))[0]
            for sock in ready:
                if sock is self.listener:
                    try:
                        conn, peer = self.listener.accept()
                    except OSError:
                        continue
                    self.pending.append(_Pending(conn, peer, time.monotonic()))
                else:
                    self._read(next(p for p in self.pending if p.sock is sock))

    def tell_all(self, kind: bytes, text: str = "") -> None:
        for p in self.joiners.values():
            try:
                p.sock.setblocking(True)
                p.sock.sendall(jp.pack_reply(self.spec.key, p.hello.nonce, kind, text))
            except OSError:
                pass

    def close(self) -> None:
        for p in [*self.pending, *self.joiners.values()]:
            try:
                p.sock.close()
            except OSError:
                pass
        self.listener.close()


def _stopped(spec: Spec, text: str) -> Exception:
    from ..events import StoppedByPeer

    return StoppedByPeer(f"{spec.tag} stopped: {text}")


def _absent_text(gathering: Gathering) -> str:
    return "; ".join(f"trainer {t} ended before the job started: {why}"
                     for t, why in sorted(gathering.absent.items()))


def _never_came(spec: Spec, missing: list[int]) -> str:
    who = ", ".join(f"{t} ({spec.endpoints[t]})" for t in missing)
    return (f"trainer(s) {who} never reached trainer 0's join point {spec.where()} within "
            f"{spec.timeout_s:g} s (SPMD_JOIN_TIMEOUT): start every trainer with the same "
            f"PADDLE_TRAINER_ENDPOINTS, PADDLE_TRAINERS_NUM and SPMD_JOB_TOKEN, and let them "
            f"reach {spec.where()}")


def _in_thread(fn, deadline: float, what: str, watch: socket.socket | None = None):
    """Run the blocking MPI call `fn` in a thread (it cannot be interrupted), waiting until
    it returns, `deadline`, or trainer 0 says over `watch` that the join failed."""
    result: dict = {}

    def call():
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            result["error"] = e

    thread = threading.Thread(target=call, name=f"spmd-join-{what}", daemon=True)
    thread.start()
    while thread.is_alive():
        if time.monotonic() > deadline:
            raise JoinError(f"{what} did not complete in time (a trainer ended while joining?)")
        if watch is not None and select.select([watch], [], [], 0)[0]:
            return "interrupted", None
        thread.join(0.01)
    if "error" in result:
        raise result["error"]
    return "done", result.get("value")


def _root_join(spec: Spec, MPI):
    listener = listen_at(*spec.root)
    deadline = time.monotonic() + spec.timeout_s
    gathering = Gathering(spec, listener)
    try:
        gathering.run(deadline)
        if gathering.absent:
            text = _absent_text(gathering)
            gathering.tell_all(b"FAIL", text)
            raise _stopped(spec, text)
        missing = gathering.missing()
        if missing:
            text = _never_came(spec, missing)
            gathering.tell_all(b"FAIL", text)
            raise JoinError(f"{spec.tag} {text}")
        if not spec.secret:
            _log(f"{spec.tag} spmd: the trainers joined without SPMD_JOB_TOKEN: the join point "
                 f"{spec.where()} admitted them by the job's layout, which is no secret; set "
                 f"SPMD_JOB_TOKEN to the same secret for every trainer")
        port = MPI.Open_port()
        comm = MPI.COMM_SELF.Dup()
        for trainer in range(1, spec.trainers):
            joiner = gathering.joiners[trainer]
            joiner.sock.setblocking(True)
            joiner.sock.sendall(jp.pack_reply(spec.key, joiner.hello.nonce, b"PORT", port))
            comm = _accept(comm, port, deadline + 30.0, f"trainer {trainer} joining", MPI)
        MPI.Close_port(port)
        gathering.tell_all(b"DONE")
        return comm
    finally:
        gathering.close()


def _accept(comm, port, deadline, what, MPI, watch=None):
    state, inter = _in_thread(lambda: comm.Accept(port, root=0), deadline, what, watch)
    if state == "interrupted":
        return None
    merged = inter.Merge(high=False)
    inter.Free()
    comm.Free()
    return merged


def _connect_to_root(spec: Spec, deadline: float) -> socket.socket:
    while True:
        try:
            return socket.create_connection(spec.root, timeout=2.0)
        except OSError:
            if time.monotonic() > deadline:
                raise JoinError(
                    f"{spec.tag} trainer 0's join point {spec.where()} did not answer within "
                    f"{spec.timeout_s:g} s (SPMD_JOIN_TIMEOUT): start trainer 0 too, with the "
                    f"same PADDLE_TRAINER_ENDPOINTS") from None
            time.sleep(_CONNECT_RETRY_S)


def _recv_exactly(sock: socket.socket, n: int, deadline: float) -> bytes:
    data = b""
    while len(data) < n:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(n - len(data))
        except TimeoutError:
            chunk = None
        if not chunk:
            return data
        data += chunk
    return data


def say_hello(spec: Spec, state: int = jp.HERE, text: str = "",
              deadline: float | None = None) -> tuple[socket.socket, bytes]:
    """Reach trainer 0 and say who this is; (the connection, this side's nonce)."""
    deadline = deadline or time.monotonic() + spec.timeout_s
    while True:
        sock = _connect_to_root(spec, deadline)
        nonce = _recv_exactly(sock, jp.NONCE, time.monotonic() + _HELLO_WAIT_S)
        if len(nonce) == jp.NONCE:
            break
        sock.close()  # a listener that is not (yet) trainer 0's: try again
        if time.monotonic() > deadline:
            raise JoinError(f"{spec.tag} {spec.where()} is not trainer 0's join point")
        time.sleep(_CONNECT_RETRY_S)
    hello, mine = jp.pack_hello(spec.key, nonce, spec.trainer, spec.trainers, state, text)
    sock.settimeout(None)
    sock.sendall(hello)
    return sock, mine


def read_reply(spec: Spec, sock: socket.socket, nonce: bytes, deadline: float
               ) -> tuple[bytes, str]:
    head = _recv_exactly(sock, jp.REPLY_HEAD, deadline)
    if len(head) < jp.REPLY_HEAD:
        return b"GONE", ""
    kind, length = jp.reply_length(spec.key, head)
    payload = _recv_exactly(sock, min(length, 1 << 16), deadline)
    text = jp.check_reply(spec.key, nonce, head, payload)
    if text is None:
        raise JoinError(f"{spec.tag} the answer from {spec.where()} is not trainer 0's "
                        f"(another job's token?)")
    return kind, text


def _joiner_join(spec: Spec, MPI):
    deadline = time.monotonic() + spec.timeout_s
    sock, nonce = say_hello(spec, deadline=deadline)
    try:
        # trainer 0 answers once every trainer came, or at its own deadline: wait past ours
        kind, text = read_reply(spec, sock, nonce, deadline + 30.0)
        if kind == b"FAIL":
            raise _stopped(spec, text)
        if kind != b"PORT":
            raise _stopped(spec, f"trainer 0 closed its join point {spec.where()} before this "
                                 f"trainer joined (trainer 0 failed?)")
        state, inter = _in_thread(lambda: MPI.COMM_SELF.Connect(text, root=0),
                                  deadline + 30.0, "connecting to the job", sock)
        if state == "interrupted":
            raise _stopped(spec, "trainer 0 gave up the join")
        comm = inter.Merge(high=True)
        inter.Free()
        for later in range(spec.trainer + 1, spec.trainers):
            comm = _accept(comm, None, deadline + 30.0, f"trainer {later} joining", MPI, sock)
            if comm is None:
                kind, text = read_reply(spec, sock, nonce, time.monotonic() + 5.0)
                raise _stopped(spec, text or "trainer 0 gave up the join")
        return comm
    finally:
        sock.close()


_joined = None


def joined_world():
    """The world of every env-only trainer, rank = trainer id (made once, at the first call;
    collective over every trainer)."""
    global _joined
    if _joined is None:
        from mpi4py import MPI

        spec = Spec()
        _joined = (_root_join if spec.trainer == 0 else _joiner_join)(spec, MPI)
        if _joined.Get_rank() != spec.trainer or _joined.Get_size() != spec.trainers:
            raise JoinError(f"{spec.tag} joined as rank {_joined.Get_rank()} of "
                            f"{_joined.Get_size()}: expected trainer id {spec.trainer} of "
                            f"{spec.trainers}")
    return _joined
