"""The join point's wire protocol: who may come in, said in a few fixed-size records.

A trainer started with fluid's PADDLE_* variables only (spmd/comm/join.py) reaches trainer 0's
endpoint over TCP. On accepting, trainer 0 sends a random nonce; the joiner answers with one
fixed-size hello: a magic, its trainer id, the trainer count, its state (0: here, to join;
otherwise it ended before joining, with that exit status) and the length of a text that
follows, all authenticated by an HMAC-SHA256 keyed with the job token over the nonce. The HMAC
is checked before any field is read, so garbage, a truncated hello or another job's token is
refused without being interpreted. Trainer 0's replies (the MPI port to connect to, or why the
job cannot start) carry an HMAC over the joiner's own nonce, so a joiner trusts no other
server. No pickle: structs and UTF-8 text only.

The token is SPMD_JOB_TOKEN, a secret every trainer of the job gets; without it, one derived
from the job's own layout (PADDLE_TRAINER_ENDPOINTS and PADDLE_TRAINERS_NUM), which keeps other
jobs out but is no secret.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import struct

MAGIC = b"SPMDJOIN"
NONCE = 16
_FIELDS = struct.Struct("!IIiI")  # trainer id, trainers, state, text length
_DIGEST = 32
HELLO = len(MAGIC) + NONCE + _FIELDS.size + _DIGEST  # nonce: the joiner's, for the reply
_REPLY_HEAD = struct.Struct("!4sI")  # kind (PORT / FAIL / DONE), payload length
REPLY_HEAD = _REPLY_HEAD.size + _DIGEST
MAX_TEXT = 4096
HERE = 0  # the hello's state: this trainer is here to join


def job_key(env) -> tuple[bytes, bool]:
    """(the HMAC key, whether it came from a secret the user set)."""
    from ..flags import flags

    token = flags(env).job_token
    if token:
        return hashlib.sha256(b"spmd job token\0" + token.encode()).digest(), True
    layout = f"{env.get('PADDLE_TRAINER_ENDPOINTS', '')}|{env.get('PADDLE_TRAINERS_NUM', '')}"
    return hashlib.sha256(b"spmd job layout\0" + layout.encode()).digest(), False


def _mac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def new_nonce() -> bytes:
    return os.urandom(NONCE)


def pack_hello(key: bytes, server_nonce: bytes, trainer: int, trainers: int, state: int,
               text: str = "") -> tuple[bytes, bytes]:
    """(the hello and the text after it, the joiner's nonce for checking the reply)."""
    raw = text.encode()[:MAX_TEXT]
    mine = new_nonce()
    body = MAGIC + mine + _FIELDS.pack(trainer, trainers, state, len(raw))
    return body + _mac(key, server_nonce, body) + raw, mine


class Hello:
    """A hello that passed the HMAC check."""

    def __init__(self, trainer: int, trainers: int, state: int, text_length: int,
                 nonce: bytes):
        self.trainer, self.trainers, self.state = trainer, trainers, state
        self.text_length, self.nonce, self.text = text_length, nonce, ""


def check_hello(key: bytes, server_nonce: bytes, record: bytes) -> Hello | None:
    """The hello in `record` (HELLO bytes) if it is this job's, else None. The HMAC first:
    nothing of a record that fails it is looked at."""
    body, digest = record[:-_DIGEST], record[-_DIGEST:]
    if len(record) != HELLO or not hmac.compare_digest(_mac(key, server_nonce, body), digest):
        return None
    if body[:len(MAGIC)] != MAGIC:
        return None
    nonce = body[len(MAGIC):len(MAGIC) + NONCE]
    trainer, trainers, state, length = _FIELDS.unpack(body[len(MAGIC) + NONCE:])
    if length > MAX_TEXT:
        return None
    return Hello(trainer, trainers, state, length, nonce)


def pack_reply(key: bytes, joiner_nonce: bytes, kind: bytes, payload: str = "") -> bytes:
    raw = payload.encode()
    head = _REPLY_HEAD.pack(kind, len(raw))
    return head + _mac(key, joiner_nonce, head, raw) + raw


def reply_length(key: bytes, head: bytes) -> tuple[bytes, int]:
    """(kind, payload length) of a reply's head (REPLY_HEAD bytes)."""
    kind, length = _REPLY_HEAD.unpack(head[:_REPLY_HEAD.size])
    return kind, length


def check_reply(key: bytes, joiner_nonce: bytes, head: bytes, payload: bytes) -> str | None:
    """The reply's payload text when trainer 0 sent it, else None."""
    digest = head[_REPLY_HEAD.size:]
    if not hmac.compare_digest(_mac(key, joiner_nonce, head[:_REPLY_HEAD.size], payload),
                               digest):
        return None
    return payload.decode(errors="replace")
