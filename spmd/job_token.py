"""The job token: what every socket spmd listens on across nodes checks before it reads
anything else, so only processes of this job get in (paddle-launch's rendezvous, the
supervisors' channel, the pservers' gRPC endpoints, the join point of env-only starts).

The token is SPMD_JOB_TOKEN: paddle-launch sets a fresh one for the workers of every job it
starts (or passes on the one the user set); for processes started without a launcher, the user
sets the same secret on every process. A connection opens with one fixed-size hello,

    SPMD1 <purpose, 8 characters> <HMAC-SHA256(token, purpose), 64 hex digits>\\n

(the token itself never travels); the listener reads exactly HELLO_LEN bytes within a deadline
and drops the connection, logging who it was, on anything else: garbage, a truncated hello,
another job's token. Imports nothing of spmd (paddle-launch uses it too).

>>> h = hello("s3cret", "channel")
>>> len(h) == HELLO_LEN, check_hello(h, "s3cret", "channel"), check_hello(h, "other", "channel")
(True, '', 'another job (its job token differs: set the same SPMD_JOB_TOKEN on every node)')
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket

# hashlib and hmac are imported where a hello is made or checked: `import spmd` in every rank
# reaches this module (the guard's channel), but only supervisors ever say hello, after the
# fork; OpenSSL's start-up (hashlib) then stays out of every program's start

TOKEN_ENV = "SPMD_JOB_TOKEN"
MAGIC = b"SPMD1 "
PURPOSE_LEN = 8
HELLO_LEN = len(MAGIC) + PURPOSE_LEN + 1 + 64 + 1
HELLO_DEADLINE_S = 5.0  # a peer that sends less than a hello in this time is dropped


def job_token(env: Mapping[str, str] | None = None) -> str | None:
    """SPMD_JOB_TOKEN, or None when not set."""
    env = os.environ if env is None else env
    return env.get(TOKEN_ENV) or None


def new_token() -> str:
    """A fresh random token (128 bits)."""
    return os.urandom(16).hex()  # what secrets.token_hex(16) is, without its imports


def _purpose(purpose: str) -> bytes:
    return purpose.encode("ascii")[:PURPOSE_LEN].ljust(PURPOSE_LEN, b"_")


def hello(token: str, purpose: str) -> bytes:
    """The hello a client sends first on a connection for `purpose` (e.g. "channel")."""
    import hashlib
    import hmac

    digest = hmac.new(token.encode(), _purpose(purpose), hashlib.sha256).hexdigest()
    return MAGIC + _purpose(purpose) + b" " + digest.encode() + b"\n"


def check_hello(data: bytes, token: str, purpose: str) -> str:
    """'' when `data` is this job's hello for `purpose`, else why not (for the log)."""
    if len(data) < HELLO_LEN:
        return f"a truncated hello ({len(data)} of {HELLO_LEN} bytes)"
    if not data.startswith(MAGIC) or data[HELLO_LEN - 1:HELLO_LEN] != b"\n":
        return f"not spmd's hello (first bytes {data[:16]!r})"
    if data[len(MAGIC):len(MAGIC) + PURPOSE_LEN] != _purpose(purpose):
        return f"a hello for another socket ({data[len(MAGIC):len(MAGIC) + PURPOSE_LEN]!r})"
    from hmac import compare_digest

    if not compare_digest(data[:HELLO_LEN], hello(token, purpose)):
        return f"another job (its job token differs: set the same {TOKEN_ENV} on every node)"
    return ""


def read_hello(sock: socket.socket, token: str, purpose: str,
               deadline_s: float = HELLO_DEADLINE_S) -> str:
    """Read exactly one hello from a freshly accepted blocking `sock` within `deadline_s`;
    '' when it is this job's, else why not. Leaves the socket's timeout as it found it."""
    previous = sock.gettimeout()
    data = b""
    end = time.monotonic() + deadline_s
    try:
        while len(data) < HELLO_LEN:
            left = end - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            try:
                chunk = sock.recv(HELLO_LEN - len(data))
            except OSError:  # a timeout too
                break
            if not chunk:
                break
            data += chunk
            if not MAGIC.startswith(data[:len(MAGIC)]):
                break  # garbage: no need to wait for the rest
    finally:
        sock.settimeout(previous)
    return check_hello(data, token, purpose)


def log_refused(where: str, peer, why: str) -> None:
    """One line on stderr for a refused connection."""
    who = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
    sys.stderr.write(f"spmd: refused a connection to {where} from {who}: {why}\n")
    sys.stderr.flush()
