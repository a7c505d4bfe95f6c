"""paddle.reader's decorators: functions that take reader creators (callables returning an
iterable of samples) and return new ones. Background work runs in daemon threads; an exception
raised by a wrapped reader or mapper is re-raised, with its traceback, where the samples are
consumed.

>>> def r():
...     yield from range(4)
>>> list(firstn(map_readers(lambda x: x * 10, r), 3)())
[0, 10, 20]
"""
from __future__ import annotations

import itertools
import random
import threading
from queue import Queue

from ..errors import InvalidArgumentError
from .handoff import END, Failure, reraise

__all__ = ["ComposeNotAligned", "buffered", "cache", "chain", "compose", "firstn",
           "map_readers", "shuffle", "xmap_readers"]  # multiprocess_reader: multiprocess.py


class ComposeNotAligned(ValueError):
    """compose(check_alignment=True) found readers yielding different numbers of samples."""


def cache(reader):
    """Read `reader` once, now, into memory; the result replays the samples every pass.

    >>> c = cache(lambda: iter([1, 2]))
    >>> list(c()), list(c())
    ([1, 2], [1, 2])
    """
    samples = tuple(reader())

    def cached():
        yield from samples

    return cached


def map_readers(func, *readers):
    """Yield func(a, b, ...) over the samples of `readers` read in step (shortest wins).

    >>> list(map_readers(lambda a, b: a + b, lambda: [1, 2], lambda: [10, 20])())
    [11, 22]
    """
    def mapped():
        yield from map(func, *[r() for r in readers])

    return mapped


def shuffle(reader, buf_size):
    """Shuffle within successive windows of `buf_size` samples (Python's `random` module, so
    `random.seed` makes it repeatable).

    >>> sorted(shuffle(lambda: range(5), 2)())
    [0, 1, 2, 3, 4]
    """
    def shuffled():
        window = []
        for sample in reader():
            window.append(sample)
            if len(window) >= buf_size:
                random.shuffle(window)
                yield from window
                window = []
        if window:
            random.shuffle(window)
            yield from window

    return shuffled


def chain(*readers):
    """All samples of the first reader, then of the second, and so on.

    >>> list(chain(lambda: [1], lambda: [2, 3])())
    [1, 2, 3]
    """
    def chained():
        yield from itertools.chain(*[r() for r in readers])

    return chained


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def compose(*readers, **kwargs):
    """Join the readers' samples read in step into one flat tuple (a tuple sample contributes
    its fields). With check_alignment=True (the default) readers of different lengths raise
    ComposeNotAligned; with False the shortest one ends the output.

    >>> list(compose(lambda: [1, 2], lambda: [(3, 4), (5, 6)])())
    [(1, 3, 4), (2, 5, 6)]
    """
    check_alignment = kwargs.pop("check_alignment", True)
    if kwargs:
        raise InvalidArgumentError(
            f"compose: unexpected keyword argument(s) {sorted(kwargs)}; only check_alignment")
    missing = object()

    def composed():
        iterators = [r() for r in readers]
        if not check_alignment:
            for outputs in zip(*iterators):
                yield sum(map(_as_tuple, outputs), ())
            return
        for outputs in itertools.zip_longest(*iterators, fillvalue=missing):
            if any(o is missing for o in outputs):
                raise ComposeNotAligned(
                    "compose: the readers are not aligned: one ended before the others; make "
                    "them yield as many samples or pass check_alignment=False")
            yield sum(map(_as_tuple, outputs), ())

    return composed


def _pump(iterable, queue: Queue):
    """Worker body: move the samples of `iterable` onto `queue`, then the end marker; an
    exception is put on the queue instead of being lost in the thread."""
    try:
        for item in iterable:
            queue.put(item)
    except BaseException as e:  # noqa: BLE001 - re-raised by the consumer
        queue.put(Failure(e))
    queue.put(END)


def buffered(reader, size):
    """Read ahead up to `size` samples in a background thread.

    >>> list(buffered(lambda: range(3), 2)())
    [0, 1, 2]
    """
    def buffered_reader():
        queue = Queue(maxsize=size)
        threading.Thread(target=_pump, args=(reader(), queue), daemon=True).start()
        while True:
            item = queue.get()
            if item is END:
                return
            reraise(item)
            yield item

    return buffered_reader


def firstn(reader, n):
    """The first `n` samples of `reader`.

    >>> list(firstn(lambda: range(10), 3)())
    [0, 1, 2]
    """
    def first():
        for i, sample in enumerate(reader()):
            if i == n:  # as fluid: a negative n never matches, so it reads everything
                return
            yield sample

    return first


def _xmap_feeder(reader, in_queue: Queue, out_queue: Queue, workers: int):
    """Number the samples (for order=True) and end with one marker per worker."""
    try:
        for i, sample in enumerate(reader()):
            in_queue.put((i, sample))
    except BaseException as e:  # noqa: BLE001 - re-raised by the consumer
        out_queue.put(Failure(e))
    for _ in range(workers):
        in_queue.put(END)


class _Turns:
    """Lets ordered xmap workers hand results over in sample order."""

    def __init__(self):
        self.next = 0
        self.cond = threading.Condition()

    def put_in_turn(self, index: int, result, out_queue: Queue):
        with self.cond:
            self.cond.wait_for(lambda: self.next == index)
            out_queue.put(result)
            self.next += 1
            self.cond.notify_all()


def _xmap_worker(mapper, in_queue: Queue, out_queue: Queue, turns: _Turns | None):
    while True:
        item = in_queue.get()
        if item is END:
            out_queue.put(END)
            return
        index, sample = item
        try:
            result = mapper(sample)
        except BaseException as e:  # noqa: BLE001 - re-raised by the consumer
            result = Failure(e)
        if turns is None:
            out_queue.put(result)
        else:
            turns.put_in_turn(index, result, out_queue)


def xmap_readers(mapper, reader, process_num, buffer_size, order=False):
    """Map `mapper` over the samples of `reader` with `process_num` worker threads, at most
    `buffer_size` samples waiting on each side; order=True keeps the input order.

    >>> sorted(xmap_readers(lambda x: x * 2, lambda: range(4), 2, 4)())
    [0, 2, 4, 6]
    >>> list(xmap_readers(lambda x: x * 2, lambda: range(4), 2, 4, order=True)())
    [0, 2, 4, 6]
    """
    if int(process_num) <= 0:
        raise InvalidArgumentError(
            f"xmap_readers: process_num must be a positive int, got {process_num!r}")

    def xreader():
        in_queue, out_queue = Queue(buffer_size), Queue(buffer_size)
        turns = _Turns() if order else None
        threading.Thread(target=_xmap_feeder, args=(reader, in_queue, out_queue, process_num),
                         daemon=True).start()
        for _ in range(process_num):
            threading.Thread(target=_xmap_worker, args=(mapper, in_queue, out_queue, turns),
                             daemon=True).start()
        finished = 0
        while finished < process_num:
            item = out_queue.get()
            if item is END:
                finished += 1
                continue
            reraise(item)
            yield item

    return xreader
