"""The trainer side of parameter-server mode at run time: this process's connections to its
pservers and where it is in the step sequence, shared by the send / recv / barrier /
prefetch kernels (spmd/ps/kernels.py).

One PServerClient per endpoint per process, made on first use (fluid's RPCClient is a
process singleton too); Executor.close() calls `complete` on every pserver this process
talked to, then closes the connections, so the pservers know this trainer is done.

Steps: in sync mode the n-th send_barrier of the process closes step n (its gradients were
sent with step n); the parameters received after it are those after step n; the n-th
fetch_barrier is barrier n of its kind on every pserver (the startup program's is the first).
Every trainer runs the same programs, so these counts agree across trainers.

>>> session().send_steps
0
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..core.lod import LoDTensor
from ..core.selected_rows import SelectedRows
from ..errors import InvalidArgumentError

__all__ = ["TrainerSession", "session"]

log = logging.getLogger(__name__)
COMPLETE_TIMEOUT_S = 60.0  # Executor.close() waits at most this long for each pserver


def to_host(value):
    """A value as it goes on the wire: numpy arrays (a GPU array or SelectedRows copied to
    the host)."""
    if isinstance(value, SelectedRows):
        return SelectedRows(to_host(value.rows), to_host(value.value), value.height)
    if isinstance(value, LoDTensor):
        return value
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "get"):  # cupy
        return value.get()
    return np.asarray(value)


class TrainerSession:
    """This process's trainer: its clients, its step counts, and the values `recv` received
    that the next fetch_barrier hands on (its outputs name them, as fluid's do)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._clients: dict = {}
        self._pool: ThreadPoolExecutor | None = None
        self.trainer_id: int | None = None
        self.send_steps = 0  # send barriers passed: the sync step being sent
        self.fetch_steps = 0  # fetch barriers passed
        self.received: dict = {}  # recv outputs, until the fetch_barrier that lists them
        self.merged: dict = {}  # merge_add sends (the async step counter): the running sums
        self.recv_ready: dict = {}  # fetched by the first recv of a group, for the others
        self.fetched_at: tuple = (None, set())  # (fetch step, endpoints) a recv group's
        # requests already waited at (the fetch_barrier after the group skips them)
        self._pending: dict = {}  # endpoint -> {name: value} queued by send ops
        self._pending_step: int | None = None
        self._pending_trainer: int | None = None

    def client(self, endpoint: str, trainer_id: int):
        from .rpc import PServerClient  # grpc loads only when a trainer talks to a pserver

        with self._lock:
            if self.trainer_id is None:
                self.trainer_id = int(trainer_id)
            elif int(trainer_id) != self.trainer_id:
                raise InvalidArgumentError(
                    f"this process already talks to the pservers as trainer {self.trainer_id}, "
                    f"but an op of trainer {trainer_id} runs here: one trainer per process; "
                    f"transpile every program of this process with the same trainer_id "
                    f"(PADDLE_TRAINER_ID)")
            c = self._clients.get(endpoint)
            if c is None:
                c = self._clients[endpoint] = PServerClient(endpoint, trainer_id)
            return c

    def queue_send(self, endpoint: str, values: dict, step: int, trainer_id: int) -> None:
        """Queue `values` for `endpoint` as gradients of `step`. The send ops of a step only
        queue; the next call that needs them delivered (a barrier, a recv, a prefetch, a
        checkpoint, close) sends each pserver everything queued in one request, all
        pservers at once: one round trip per pserver per step instead of one per variable."""
        if self._pending and self._pending_step != step:
            self.flush()
        self._pending_step, self._pending_trainer = step, trainer_id
        self._pending.setdefault(endpoint, {}).update(values)

    def flush(self, then_barrier: bool = False) -> set:
        """Send what the send ops queued (see queue_send); the first failure is raised. With
        `then_barrier` each of those requests also waits at the step's send barrier (one
        round trip for both). Returns the endpoints sent to."""
        if not self._pending:
            return set()
        self.recv_ready = {}  # what was fetched before these sends is out of date
        pending, self._pending = self._pending, {}
        step, trainer = self._pending_step, self._pending_trainer
        self.each(lambda ep: self.client(ep, trainer).send_variables(
            pending[ep], step=step, then_barrier=then_barrier), list(pending))
        return set(pending)

    def each(self, fn, items) -> list:
        """fn(item) for every item, concurrently (one call per pserver at a time); the first
        failure is raised once all finished."""
        items = list(items)
        if len(items) <= 1:
            return [fn(item) for item in items]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(8, thread_name_prefix="ps-trainer")
            pool = self._pool
        futures = [pool.submit(fn, item) for item in items]
        errors = [f.exception() for f in futures]
        for e in errors:
            if e is not None:
                raise e
        return [f.result() for f in futures]

    def per_endpoint(self, names, endpoints) -> dict:
        """{endpoint: [names]} in order, checking there is one endpoint per name."""
        names, endpoints = list(names), list(endpoints)
        if len(names) != len(endpoints):
            raise InvalidArgumentError(
                f"{len(names)} variables {names[:4]} but {len(endpoints)} pserver endpoints "
                f"{endpoints[:4]} (epmap): the program was not made by the transpiler, or "
                f"was edited after it")
        groups: dict = {}
        for n, ep in zip(names, endpoints):
            groups.setdefault(ep, []).append(n)
        return groups

    def close(self) -> None:
        """Deliver the queued sends, tell every pserver this trainer is done, close the
        connections, start over."""
        try:
            self.flush()
        except Exception:  # noqa: BLE001 - the pservers are still told, below
            log.exception("the last queued gradients could not be sent")
            self._pending = {}
        with self._lock:
            clients, self._clients = self._clients, {}
            pool, self._pool = self._pool, None
            self.trainer_id = None
            self.send_steps = self.fetch_steps = 0
            self.received, self.merged, self.recv_ready = {}, {}, {}
        errors = []
        for c in clients.values():  # one at a time: a dead pserver fails at once
            try:
                c.complete(timeout=min(COMPLETE_TIMEOUT_S, c.deadline))
            except Exception as e:  # noqa: BLE001 - every pserver is told, then raised
                errors.append(e)
            finally:
                c.close()
        if pool is not None:
            pool.shutdown(wait=False)
        if errors:
            raise errors[0]


_SESSION = TrainerSession()


def session() -> TrainerSession:
    """This process's trainer session."""
    return _SESSION
