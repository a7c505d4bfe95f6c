"""fluid's LoDTensorBlockingQueue: what `py_reader.queue` is. A program pushes batches into
it itself (one LoDTensorArray, or list of arrays, per batch, in the reader's slot order), and
each run of the program reading the py_reader takes the next one; `close()` says no more
will come, and once the queue is drained the runs end the epoch with fluid.core.EOFException.

>>> q = FeedQueue(2)
>>> q.push([[1.0]]), q.size()
(True, 1)
>>> q.close(); q.next(), q.next() is END
([[1.0]], True)
"""
from __future__ import annotations

import threading
from collections import deque

from ..errors import InvalidArgumentError
from .handoff import END

__all__: list[str] = []


class FeedQueue:
    """A bounded queue of batches; push() blocks while it holds `capacity` of them."""

    def __init__(self, capacity: int):
        self._capacity = int(capacity)
        self._items: deque = deque()
        self._closed = False
        self._cond = threading.Condition()

    # -- fluid's methods ---------------------------------------------------------------------
    def push(self, batch) -> bool:
        """Add one batch (a LoDTensorArray or a list of arrays); blocks while the queue is
        full. False (and nothing added) once the queue is closed, as fluid's."""
        if not isinstance(batch, (list, tuple)):
            raise InvalidArgumentError(
                f"py_reader.queue.push: expected one batch, a LoDTensorArray (or list) of "
                f"tensors in the reader's slot order, got {type(batch).__name__}")
        with self._cond:
            while len(self._items) >= self._capacity and not self._closed:
                self._cond.wait()
            if self._closed:
                return False
            self._items.append(list(batch))
            self._cond.notify_all()
            return True

    def close(self) -> None:
        """No more batches: the reader ends the epoch after the ones queued."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def kill(self) -> None:
        """Close and drop what is queued."""
        with self._cond:
            self._closed = True
            self._items.clear()
            self._cond.notify_all()

    def size(self) -> int:
        with self._cond:
            return len(self._items)

    def capacity(self) -> int:
        return self._capacity

    def is_closed(self) -> bool:
        with self._cond:
            return self._closed

    # -- the loader's side -------------------------------------------------------------------
    def next(self):
        """The next batch, blocking until one is pushed; END once closed and drained."""
        with self._cond:
            while not self._items and not self._closed:
                self._cond.wait()
            if not self._items:
                return END
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def reopen(self) -> None:
        """A new epoch (the loader's start() after reset()): empty and open again."""
        with self._cond:
            self._items.clear()
            self._closed = False
            self._cond.notify_all()
