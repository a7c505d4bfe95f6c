"""What a pserver does with the calls its gRPC server receives: the handler interface the
pserver runtime implements, and InMemoryHandler, a small reference implementation.

The server (spmd.ps.rpc.PServer) has already decoded and checked the frame, the call's fields
and the trainer id when a handler method runs. Methods are called concurrently from the
server's threads; each waiting one is given `timeout` (seconds, never None), the caller's
remaining deadline less a margin, and must give up by then. A handler reports a bad request
by raising, and the server turns that into an error status for that caller only:

- ``NotFoundError`` (or UnknownVariableError): a variable or table it does not hold;
- ``InvalidArgumentError``: a value of the wrong shape, dtype or kind, an id out of range;
- ``TimeoutError``: a wait (a barrier, a step) outlasted `timeout`; say who is missing;
- ``PreconditionError``: a call out of order (a trainer sending after it completed).

Anything else is a bug: the server logs its traceback and answers INTERNAL.
"""
from __future__ import annotations

import threading

import numpy as np

from ..core.lod import LoDTensor
from ..core.selected_rows import SelectedRows
from ..errors import InvalidArgumentError, NotFoundError, PreconditionError

__all__ = ["BARRIER_KINDS", "InMemoryHandler", "PServerHandler", "UnknownVariableError"]

BARRIER_KINDS = ("send", "fetch")  # fluid's send barrier (BATCH_BARRIER) and fetch barrier


class UnknownVariableError(NotFoundError):
    """A call named a variable the pserver does not hold."""


class PServerHandler:
    """The calls of a pserver. Values are np.ndarray, LoDTensor or SelectedRows."""

    def send_variables(self, trainer_id: int, step: int, values: dict) -> None:
        """Trainer `trainer_id`'s gradients (or other variables) of its step `step`."""
        raise NotImplementedError

    def get_variables(self, trainer_id: int, names: list, min_step: int | None,
                      timeout: float) -> dict:
        """The current values of `names`; with `min_step`, first wait until the parameters
        are those after step `min_step`."""
        raise NotImplementedError

    def prefetch(self, trainer_id: int, table: str, ids: np.ndarray, timeout: float):
        """Rows `ids` (int64, 1-D) of the distributed table `table`, as one array."""
        raise NotImplementedError

    def barrier(self, trainer_id: int, kind: str, step: int, timeout: float) -> None:
        """Wait until every trainer still running reached barrier `kind` (BARRIER_KINDS)."""
        raise NotImplementedError

    def checkpoint_notify(self, trainer_id: int, dirname: str) -> None:
        """Save this pserver's slice of the persistables under `dirname`."""
        raise NotImplementedError

    def complete(self, trainer_id: int) -> None:
        """Trainer `trainer_id` is done (fluid's Executor.close()); barriers stop waiting
        for it."""
        raise NotImplementedError

    def shutdown(self) -> None:
        """The server stops: wake every waiting call (it then fails)."""


def _compatible(name: str, held, value) -> None:
    held_arr = held.array if isinstance(held, LoDTensor) else held
    if isinstance(value, SelectedRows):
        ok = (held_arr.ndim >= 1 and value.height == held_arr.shape[0]
              and value.value.shape[1:] == held_arr.shape[1:])
        got = f"SelectedRows of height {value.height}, rows {list(value.value.shape[1:])}"
        dtype = value.value.dtype
    else:
        arr = value.array if isinstance(value, LoDTensor) else value
        ok, got, dtype = arr.shape == held_arr.shape, f"shape {list(arr.shape)}", arr.dtype
    if not ok or dtype != held_arr.dtype:
        raise InvalidArgumentError(
            f"variable {name!r}: expected {held_arr.dtype} of shape {list(held_arr.shape)}, "
            f"got {dtype} {got}")


def _copy(value):
    if isinstance(value, LoDTensor):
        return LoDTensor(value.array.copy(), value.lod_value)
    return value.copy()


class InMemoryHandler(PServerHandler):
    """A pserver holding `variables` ({name: ndarray}) for `trainers` trainers. A dense value
    sent replaces the one held; a SelectedRows overwrites its rows. A trainer's step counts
    once it sent; `get_variables(min_step=s)` waits until every running trainer sent step s.
    `received` records every send as {(trainer_id, step): values}; `checkpoints` every
    checkpoint_notify as {dirname: copies of the variables}."""

    def __init__(self, variables: dict, trainers: int):
        self.variables = dict(variables)
        self.trainers = int(trainers)
        self.received: dict = {}
        self.checkpoints: dict = {}
        self.completed: set = set()
        self._sent = dict.fromkeys(range(self.trainers), -1)
        self._arrived = {kind: {} for kind in BARRIER_KINDS}
        self._generation = dict.fromkeys(BARRIER_KINDS, 0)
        self._closed = False
        self._cond = threading.Condition()

    def _held(self, name: str):
        if name not in self.variables:
            raise UnknownVariableError(
                f"unknown variable {name!r}: this pserver holds {sorted(self.variables)[:20]}")
        return self.variables[name]

    def _running(self, trainer_id: int, what: str) -> None:
        if self._closed:
            raise PreconditionError("the pserver is shutting down")
        if trainer_id in self.completed:
            raise PreconditionError(f"trainer {trainer_id} called {what} after it completed")

    def _wait(self, ready, timeout: float, why) -> None:
        if not self._cond.wait_for(lambda: ready() or self._closed, timeout):
            raise TimeoutError(why())
        if self._closed and not ready():
            raise PreconditionError("the pserver is shutting down")

    def send_variables(self, trainer_id, step, values):
        with self._cond:
            self._running(trainer_id, "send_variables")
            for name, value in values.items():
                _compatible(name, self._held(name), value)
            for name, value in values.items():
                if isinstance(value, SelectedRows):
                    self.variables[name][value.rows] = value.value
                else:
                    self.variables[name] = value
            self.received[(trainer_id, step)] = values
            self._sent[trainer_id] = max(self._sent[trainer_id], step)
            self._cond.notify_all()

    def _behind(self, step: int) -> list:
        return sorted(t for t, s in self._sent.items() if s < step and t not in self.completed)

    def get_variables(self, trainer_id, names, min_step, timeout):
        with self._cond:
            for name in names:
                self._held(name)
            if min_step is not None:
                self._wait(lambda: not self._behind(min_step), timeout,
                           lambda: f"step {min_step} not reached within {timeout:.1f} s: "
                                   f"trainers {self._behind(min_step)} have not sent it")
            return {name: _copy(self.variables[name]) for name in names}  # not torn by a send

    def prefetch(self, trainer_id, table, ids, timeout):
        with self._cond:
            held = self._held(table)
            held = held.array if isinstance(held, LoDTensor) else held
            if held.ndim < 1 or (ids.size and (ids.min() < 0 or ids.max() >= held.shape[0])):
                raise InvalidArgumentError(
                    f"prefetch of table {table!r}: ids must be in [0, {len(held)}), got "
                    f"[{ids.min()}, {ids.max()}]")
            return held[ids]

    def _release(self, kind: str) -> None:
        running = set(range(self.trainers)) - self.completed
        arrived = self._arrived[kind]
        if arrived and set(arrived) >= running:
            arrived.clear()
            self._generation[kind] += 1
            self._cond.notify_all()

    def barrier(self, trainer_id, kind, step, timeout):
        with self._cond:
            self._running(trainer_id, f"the {kind} barrier")
            arrived = self._arrived[kind]
            arrive(arrived, trainer_id, kind, step)
            generation = self._generation[kind]
            self._release(kind)

            def missing():
                arrived.pop(trainer_id, None)
                lost = set(range(self.trainers)) - self.completed - set(arrived) - {trainer_id}
                return (f"{kind} barrier of step {step}: trainers {sorted(lost)} did not "
                        f"arrive within {timeout:.1f} s")

            self._wait(lambda: self._generation[kind] != generation, timeout, missing)

    def checkpoint_notify(self, trainer_id, dirname):
        with self._cond:
            self.checkpoints[dirname] = {n: _copy(v) for n, v in self.variables.items()}

    def complete(self, trainer_id):
        with self._cond:
            self.completed.add(trainer_id)
            for kind in BARRIER_KINDS:
                self._release(kind)
            self._cond.notify_all()

    def shutdown(self):
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def arrive(arrived: dict, trainer_id: int, kind: str, step: int, where: str = "") -> None:
    """Record `trainer_id` at the `kind` barrier of `step` in `arrived` (trainer -> step), or
    refuse it when the trainers already waiting there are at another step."""
    others = {s for t, s in arrived.items() if t != trainer_id}
    if others and step not in others:
        raise InvalidArgumentError(
            f"{where}{kind} barrier: trainer {trainer_id} is at step {step} but trainers "
            f"{sorted(arrived)} wait at step {others.pop()}")
    arrived[trainer_id] = step
