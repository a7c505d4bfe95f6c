"""The background half of every loader: a daemon thread runs the batch source into a bounded
queue (capacity batches), so reading and converting the next batches overlaps the compute of
the current one. An exception in the source is handed over and re-raised, with the source's
traceback, in the thread that asks for the next batch (so under mpiexec the rank fails with
it and the job ends)."""
from __future__ import annotations

import threading
from queue import Empty, Full, Queue

from .handoff import END, Failure

__all__: list[str] = []


class Prefetcher:
    """Runs `source` (an iterable) in a daemon thread into a queue of `capacity` items.

    >>> p = Prefetcher(iter([1, 2]), capacity=2)
    >>> p.next(), p.next(), p.next() is Prefetcher.END
    (1, 2, True)
    """

    END = END  # the shared end marker (handoff.py), for callers of next()

    def __init__(self, source, capacity: int, stage=None):
        self._queue: Queue = Queue(maxsize=max(1, int(capacity)))
        self._stop = threading.Event()
        self._stage = stage
        self._done = False
        self._ended = False  # the end marker is in the queue (or was taken)
        self._thread = threading.Thread(target=self._run, args=(source,), daemon=True,
                                        name="spmd-reader")
        self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except Full:
                continue
        return False

    def _run(self, source):
        try:
            for item in source:
                if self._stage is not None:
                    item = self._stage(item)
                if not self._put(item):
                    return
        except BaseException as e:  # noqa: BLE001 - re-raised in the consuming thread
            self._put(Failure(e))
            return
        self._ended = self._put(END)

    @property
    def thread(self) -> threading.Thread:
        """The reading thread (fluid programs join a py_reader's after setting `exited`)."""
        return self._thread

    def size(self) -> int:
        """How many items are read ahead, waiting in the queue now (the end marker aside)."""
        return max(0, self._queue.qsize() - (self._ended and not self._done))

    def next(self):
        """The next item, or Prefetcher.END once the source is exhausted; re-raises the
        source's exception (with its traceback) if it raised."""
        if self._done:
            return END
        item = self._queue.get()
        if item is END:
            self._done = True
        elif isinstance(item, Failure):
            self._done = True
            raise item.error
        return item

    def close(self):
        """Stop the thread (after the item it is reading) and drop what is queued."""
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get(timeout=0.05)
            except Empty:
                pass
        self._done = True
