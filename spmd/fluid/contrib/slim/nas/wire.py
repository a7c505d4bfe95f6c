"""The light-NAS wire format between SearchAgent and ControllerServer: one line of text each
way (no pickle): the agent sends 'next_tokens' or '<key>\\t<t1,t2,...>\\t<reward>', the server
answers '<t1,t2,...>'. Lines are bounded (MAX_LINE bytes) and read under a timeout.

>>> encode_update("light-nas", [1, 0, 3], 0.5)
b'light-nas\\t1,0,3\\t0.5\\n'
>>> parse_tokens("1,0,3")
[1, 0, 3]
"""
from __future__ import annotations

__all__ = ["MAX_LINE", "LOOPBACK", "check_loopback", "encode_update", "parse_tokens",
           "read_line", "send_line"]

MAX_LINE = 1 << 16
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def check_loopback(ip, who):
    """The loopback address for `ip` ('' and None mean 127.0.0.1); any other address is
    refused: the NAS controller serves the processes of this machine only."""
    if ip in (None, ""):
        return "127.0.0.1"
    if ip not in LOOPBACK:
        raise ValueError(f"{who}: address {ip!r} is not a loopback address; spmd's light-NAS "
                         f"controller listens on and is reached at 127.0.0.1 only (agents on "
                         f"other machines are not supported)")
    return ip


def encode_update(key, tokens, reward):
    return f"{key}\t{','.join(str(int(t)) for t in tokens)}\t{float(reward)!r}\n".encode()


def parse_tokens(text):
    """A comma-separated list of ints; ValueError naming the text otherwise."""
    try:
        return [int(t) for t in text.strip().split(",")]
    except ValueError:
        raise ValueError(f"light-NAS: tokens must be comma-separated ints, got "
                         f"{text.strip()[:80]!r}") from None


def send_line(conn, text):
    data = text if isinstance(text, bytes) else (text + "\n").encode()
    conn.sendall(data)


def read_line(conn):
    """One line from `conn` (its timeout applies), without the newline; the text so far when
    the peer closes first. ValueError past MAX_LINE bytes."""
    chunks, size = [], 0
    while True:
        try:
            chunk = conn.recv(4096)
        except TimeoutError:
            raise TimeoutError("light-NAS: the peer sent no complete line in time") from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk:
            break
        if size > MAX_LINE:
            raise ValueError(f"light-NAS: a message longer than {MAX_LINE} bytes")
    return b"".join(chunks).split(b"\n", 1)[0].decode("utf-8", "replace")
