"""fluid.io.DataLoader.from_generator and fluid.io.PyReader: batches from a Python generator,
read ahead by a background thread (capacity batches), handed out either by iteration
(iterable=True: one feed dict per place per step) or, for iterable=False, added to the feed
of every run of the main program it was created in (start(); run until
fluid.core.EOFException; reset())."""
from __future__ import annotations

import numbers

import numpy as np

from ..core.lod import LoDTensor
from ..core.operator import OpRole
from ..core.places import CPUPlace, Place
from ..core.program import default_main_program
from ..core.variable import Variable
from ..errors import EOFException, InvalidArgumentError, PreconditionError
from ..ops.registry import get_op_def
from .batch import batch as _batch
from .feeder import DataFeeder
from .prefetch import Prefetcher

__all__ = ["DataLoader", "PyReader"]


def _as_places(places, who: str) -> list[Place]:
    items = list(places) if isinstance(places, (list, tuple)) else [places]
    for p in items:
        if not isinstance(p, Place):
            raise InvalidArgumentError(
                f"{who}: places must be a place or a list of places (fluid.CPUPlace(), "
                f"fluid.cuda_places(), ...), got {p!r}")
    if not items:
        raise InvalidArgumentError(f"{who}: places is an empty list")
    return items


def _batch_arrays(batch, names: list[str], index: int) -> list[LoDTensor]:
    """One batch from a batch generator as LoDTensors in feed_list order, as fluid's loaders
    yield them (`.shape()`, `.lod()`, `np.array(t)`). A dense array is wrapped, not copied,
    on the reading thread; the executor takes a LoDTensor feed as cheaply as an array."""
    if isinstance(batch, dict):
        batch = [batch[n] for n in names]
    if not isinstance(batch, (list, tuple)) or len(batch) != len(names):
        got = (f"has {len(batch)} field(s)" if isinstance(batch, (list, tuple)) else
               f"is a {type(batch).__name__}, not a list of fields")
        raise InvalidArgumentError(
            f"DataLoader: batch {index} of the batch generator {got}; feed_list has "
            f"{len(names)} ({names}): yield one array per fed variable, in feed_list order")
    arrays = []
    for name, value in zip(names, batch):
        if isinstance(value, LoDTensor):  # a LoD variable's batch: its rows and their LoD
            arrays.append(value)
            continue
        try:
            array = np.asarray(value)
        except ValueError:
            array = np.asarray(value, dtype=object)
        if array.dtype == object:
            raise InvalidArgumentError(
                f"DataLoader: batch {index}, variable '{name}': the data does not form a regular "
                f"array (nested lists of different lengths?); give equal-length samples")
        arrays.append(LoDTensor(array))
    return arrays


class _ReadAhead:
    """A loader's read-ahead queue as fluid's LoDTensorBlockingQueue shows it (size,
    capacity, is_closed); the loader's own methods start and reset the reading."""

    def __init__(self, loader):
        self._loader = loader

    def size(self) -> int:
        prefetch = self._loader._prefetch
        return prefetch.size() if isinstance(prefetch, Prefetcher) else 0

    def capacity(self) -> int:
        return self._loader._capacity

    def is_closed(self) -> bool:
        return not self._loader._running


class GeneratorLoader:
    """What DataLoader.from_generator returns (see there)."""

    def __init__(self, feed_list=None, capacity=None, use_double_buffer=True, iterable=True,
                 return_list=False, drop_last=True):
        if not capacity:
            raise InvalidArgumentError(
                "DataLoader.from_generator: give capacity, the number of batches read ahead")
        if isinstance(capacity, bool) or not isinstance(capacity, numbers.Integral):
            raise InvalidArgumentError(f"DataLoader: capacity must be an int, got {capacity!r}")
        if not feed_list:
            raise InvalidArgumentError(
                "DataLoader.from_generator: feed_list must list the data variables it feeds")
        for var in feed_list:
            if not isinstance(var, Variable):
                raise InvalidArgumentError(
                    f"DataLoader: feed_list must hold Variables, got {type(var).__name__}")
        self._feed_list = list(feed_list)
        self._names = [v.name for v in self._feed_list]
        self._capacity = int(capacity)
        self._use_double_buffer = bool(use_double_buffer)
        self._iterable = bool(iterable)
        self._return_list = bool(return_list)
        self._drop_last = bool(drop_last)
        self._batches = None  # the batch generator creator
        self._places: list[Place] | None = None
        self._prefetch: Prefetcher | None = None
        self._running = False
        self._program = None  # iterable=False: the Program whose runs this loader feeds
        self._queue = None  # a FeedQueue the program pushes batches into (py_reader.queue)
        self._thread = None  # the last reading thread (fluid programs join py_reader.thread)
        if not self._iterable:
            self._program = default_main_program()
            self._program.run_hooks.append(_ReaderHook(self))

    @property
    def iterable(self) -> bool:
        return self._iterable

    @property
    def queue(self):
        """fluid's LoDTensorBlockingQueue of the loader: `size()` the batches read ahead now
        (BERT's train.py prints it each step), `capacity()`, `is_closed()`. Where a program
        pushes its own batches (a py_reader's queue) it is that queue."""
        return self._queue if self._queue is not None else _ReadAhead(self)

    @classmethod
    def _check_input_array(cls, item) -> np.ndarray:
        """`item` as a regular array; a TypeError when it is not one (nested lists of
        different lengths), as fluid 1.8's check of each field a batch generator yields."""
        try:
            array = np.asarray(item)
        except ValueError:  # numpy >= 1.24 refuses ragged nesting outright
            array = np.asarray(item, dtype=object)
        if array.dtype == object:
            raise TypeError(
                "DataLoader: failed to convert the input data to a regular array: it holds "
                "nested lists of different lengths; check the generator given to "
                "set_batch_generator / decorate_batch_generator, or make a LoD tensor with "
                "fluid.create_lod_tensor")
        return array

    def _reset(self):
        """Stop reading and drop what was read ahead, in either mode (fluid's `_reset`, which
        a program calls to end an iterable loader's epoch early, after a `break`)."""
        self._stop_thread()

    # -- data sources ------------------------------------------------------------------------
    def set_sample_generator(self, reader, batch_size, drop_last=True, places=None):
        """Source: a generator creator of samples (tuples in feed_list order), batched here
        into `batch_size`, the short last batch dropped unless drop_last=False.

        >>> # loader.set_sample_generator(samples, batch_size=32, places=fluid.cpu_places())
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) \
                or batch_size <= 0:
            raise InvalidArgumentError(
                f"set_sample_generator: batch_size must be an int > 0, got {batch_size!r}")
        return self.set_sample_list_generator(_batch(reader, batch_size, drop_last), places)

    def set_sample_list_generator(self, reader, places=None):
        """Source: a generator creator of lists of samples (what paddle.batch makes).

        >>> # loader.set_sample_list_generator(paddle.batch(samples, 32), places=place)
        """
        feeder = DataFeeder(self._feed_list, CPUPlace())

        def batches():
            for minibatch in reader():
                feed = feeder.feed(minibatch)
                yield [feed[n] for n in self._names]

        return self.set_batch_generator(batches, places)

    def set_batch_generator(self, reader, places=None):
        """Source: a generator creator of batches, each a list (or tuple) of arrays in
        feed_list order. `places` is required when the loader is iterable.

        >>> # loader.set_batch_generator(batches, places=fluid.CPUPlace())
        """
        if not callable(reader):
            raise InvalidArgumentError(
                f"DataLoader: the generator must be a callable returning an iterable, got "
                f"{type(reader).__name__}; pass the function, not its call")
        if self._iterable:
            if places is None:
                raise InvalidArgumentError(
                    "DataLoader: places must be given when the loader is iterable, e.g. "
                    "places=fluid.CPUPlace() or places=fluid.cuda_places()")
            self._places = _as_places(places, "DataLoader")
        self._batches = reader
        return self

    # -- the reading thread ------------------------------------------------------------------
    def _source(self):
        for i, batch in enumerate(self._batches()):
            yield _batch_arrays(batch, self._names, i)

    def _feed_from(self, queue) -> None:
        """Take the batches a program pushes into `queue` (a FeedQueue), from now on: the
        runs read them without start(), as fluid's py_reader does with its queue."""
        self._stop_thread()
        self._queue = queue
        self._prefetch = _QueueSource(queue, self._names)
        self._running = True

    def _start(self):
        if self._queue is not None and self._batches is None:  # the program pushes
            self._queue.reopen()
            self._prefetch = _QueueSource(self._queue, self._names)
            self._running = True
            return
        if self._batches is None:
            raise PreconditionError(
                "DataLoader: no data source: call set_sample_generator, "
                "set_sample_list_generator or set_batch_generator first")
        self._stop_thread()
        self._prefetch = Prefetcher(self._source(), self._capacity)
        self._thread = self._prefetch.thread
        self._running = True

    def _stop_thread(self):
        if self._prefetch is not None:
            if not isinstance(self._prefetch, _QueueSource):  # the program's queue stays
                self._prefetch.close()
            self._prefetch = None
        self._running = False

    def _next_batches(self, count: int) -> list[list[LoDTensor]]:
        """Up to `count` batches (one per place); fewer only at the end of the data."""
        out = []
        while len(out) < count:
            item = self._prefetch.next()
            if item is Prefetcher.END:
                break
            out.append(item)
        if len(out) < count and (self._drop_last or not out):
            return []
        return out

    # -- iterable mode -----------------------------------------------------------------------
    def __call__(self):
        return self

    def __iter__(self):
        if not self._iterable:
            raise PreconditionError(
                "DataLoader: this loader is not iterable (iterable=False): call start() and "
                "run the program until fluid.core.EOFException, then reset()")
        self._start()
        return self

    def __next__(self):
        if not self._running:
            raise StopIteration
        batches = self._next_batches(len(self._places))
        if not batches:
            self._stop_thread()
            raise StopIteration
        if self._return_list:
            return batches
        return [dict(zip(self._names, arrays)) for arrays in batches]

    next = __next__

    # -- non-iterable mode -------------------------------------------------------------------
    def start(self):
        """Start reading (iterable=False): the following runs of the program take batches.

        >>> # loader.start()
        """
        if self._iterable:
            raise PreconditionError("DataLoader: start() is for iterable=False loaders; "
                                    "iterate the loader instead: for data in loader(): ...")
        if self._running and not isinstance(self._prefetch, _QueueSource):
            raise PreconditionError(
                "DataLoader: start() called twice: call reset() after the "
                "fluid.core.EOFException that ends an epoch, then start() again")
        self._start()

    def reset(self):
        """End the epoch (iterable=False): stop reading and drop what was read ahead.

        >>> # loader.reset()
        """
        if self._iterable:
            raise PreconditionError("DataLoader: reset() is for iterable=False loaders")
        self._stop_thread()

    def _feed_for_run(self, feed, num_places: int, program=None):
        """The run hook's work: `feed` with this loader's next batch(es) added. `program` is
        the Program being run (None: the one this loader was made in)."""
        if not self._running:
            raise PreconditionError(
                f"the program reads from a DataLoader/PyReader (feeding {self._names}) that is "
                f"not started: call loader.start() before running it (and reset() after "
                f"fluid.core.EOFException)")
        batches = self._next_batches(num_places)
        if not batches:
            raise EOFException(
                f"the DataLoader/PyReader feeding {self._names} has no more data: catch "
                f"fluid.core.EOFException, call reset(), and start() the next epoch")
        if len(batches) < num_places and _runs_on_every_place(
                program if program is not None else self._program):
            # fluid 1.8 cannot run a training step on fewer places than it compiled for: its
            # reader ends the epoch there, so the left-over batches are dropped
            raise EOFException(
                f"the DataLoader/PyReader feeding {self._names} has no more data: the "
                f"{len(batches)} batch(es) left for {num_places} places were dropped, since a "
                f"training program (or one with collectives) runs on every place "
                f"(drop_last=False keeps them only for programs without a backward pass, as "
                f"in fluid); catch fluid.core.EOFException, call reset(), and start() the "
                f"next epoch")
        feeds = [dict(zip(self._names, arrays)) for arrays in batches]
        if num_places == 1 and isinstance(feed, dict):
            feed.update(feeds[0])
            return feed
        # several places: one dict per place that has a batch; with drop_last=False the last
        # run may feed only the first k places (fluid runs a test program on those only)
        if isinstance(feed, dict):
            return [{**feed, **f} for f in feeds]
        return [{**f0, **f} for f0, f in zip(feed, feeds)]


class _QueueSource:
    """A FeedQueue read as the loader reads its read-ahead thread: next() gives one batch
    as LoDTensors in feed_list order, or END."""

    def __init__(self, queue, names: list[str]):
        self._queue, self._names, self._count = queue, names, 0

    def next(self):
        batch = self._queue.next()
        if batch is Prefetcher.END:
            return batch
        self._count += 1
        return _batch_arrays(batch, self._names, self._count - 1)


def _runs_on_every_place(program) -> bool:
    """Whether a data-parallel step of `program` needs every place: it trains (fluid's
    "training network", a backward pass) or holds collectives, which the places left out
    would never join. The executor draws the same line for a short list feed."""
    return program is not None and any(
        op.role in (OpRole.BACKWARD, OpRole.LOSS) or get_op_def(op.type).collective
        for op in program.global_block().ops)


class _ReaderHook:
    """A Program run hook: gives each run of the program the loader's next batch(es)."""

    takes_places = True  # Executor passes the number of places the run feeds

    def __init__(self, loader: GeneratorLoader):
        self.loader = loader

    def __call__(self, feed, scope, num_places: int = 1, program=None):
        return self.loader._feed_for_run(feed, num_places, program)


class DataLoader:
    """fluid.io.DataLoader: made with DataLoader.from_generator or from_dataset.

    >>> import spmd.fluid as fluid
    >>> with fluid.program_guard(fluid.Program(), fluid.Program()):
    ...     x = fluid.data(name="x", shape=[None, 2], dtype="float32")
    ...     loader = DataLoader.from_generator(feed_list=[x], capacity=4)
    >>> def batches():
    ...     for i in range(3):
    ...         yield [np.full((2, 2), i, "float32")]
    >>> _ = loader.set_batch_generator(batches, places=fluid.CPUPlace())
    >>> [float(np.array(d[0]["x"])[0, 0]) for d in loader()]
    [0.0, 1.0, 2.0]
    """

    def __init__(self, *args, **kwargs):
        raise InvalidArgumentError(
            "fluid.io.DataLoader(dataset, ...) (the paddle.io.Dataset form) is not provided "
            "by spmd: use fluid.io.DataLoader.from_generator(feed_list=..., capacity=...) and "
            "set_sample_generator / set_sample_list_generator / set_batch_generator")

    @staticmethod
    def from_generator(feed_list=None, capacity=None, use_double_buffer=True, iterable=True,
                       return_list=False, use_multiprocess=False, drop_last=True):
        """A loader feeding `feed_list` from a Python generator, `capacity` batches read
        ahead by a background thread. iterable=True: `for data in loader(): exe.run(feed=data)`
        (data: one feed dict per place, or with return_list=True one list of arrays per place);
        iterable=False: loader.start(), then exe.run(program) takes the next batch each run
        until fluid.core.EOFException, then loader.reset(). With several places each place
        gets its own batch; drop_last=True drops the batches left over when fewer remain than
        places; drop_last=False gives them to the first places only (iterable: a shorter list;
        a program without a backward pass then runs on those places, as in fluid, while a
        training program refuses the short list, and with start() ends the epoch before it,
        dropping them). use_multiprocess is a dygraph option in fluid 1.8 and has no effect
        here, as in fluid's static mode.

        >>> # loader = fluid.io.DataLoader.from_generator(feed_list=[img, label], capacity=8)
        """
        return GeneratorLoader(feed_list, capacity, use_double_buffer, iterable, return_list,
                               drop_last)

    @staticmethod
    def from_dataset(dataset, places, drop_last=True):
        """An iterable loader over a fluid Dataset's batches: each step one feed dict per
        place (spmd.datafeed.loader).

        >>> # for data in fluid.io.DataLoader.from_dataset(dataset, fluid.cpu_places()): ...
        """
        from ..datafeed.loader import DatasetLoader

        return DatasetLoader(dataset, places, drop_last)


class PyReader:
    """fluid.io.PyReader: DataLoader.from_generator with fluid 1.x's decorate_* names.

    >>> # reader = fluid.io.PyReader(feed_list=[x, y], capacity=4, iterable=False)
    >>> # reader.decorate_sample_list_generator(paddle.batch(samples, 8))
    """

    def __init__(self, feed_list=None, capacity=None, use_double_buffer=True, iterable=True,
                 return_list=False):
        self._loader = GeneratorLoader(feed_list, capacity, use_double_buffer, iterable,
                                       return_list)

    @property
    def iterable(self) -> bool:
        return self._loader.iterable

    def __call__(self):
        return self._loader()

    def __iter__(self):
        return self._loader.__iter__()

    def __next__(self):
        return self._loader.__next__()

    def start(self):
        """Start reading (iterable=False)."""
        self._loader.start()

    def reset(self):
        """End the epoch after fluid.core.EOFException (iterable=False)."""
        self._loader.reset()

    def decorate_sample_generator(self, sample_generator, batch_size, drop_last=True,
                                  places=None):
        """Source: samples, batched here (see DataLoader.set_sample_generator)."""
        self._loader.set_sample_generator(sample_generator, batch_size, drop_last, places)

    def decorate_sample_list_generator(self, reader, places=None):
        """Source: lists of samples (see DataLoader.set_sample_list_generator)."""
        self._loader.set_sample_list_generator(reader, places)

    def decorate_batch_generator(self, reader, places=None):
        """Source: batches of arrays (see DataLoader.set_batch_generator)."""
        self._loader.set_batch_generator(reader, places)
