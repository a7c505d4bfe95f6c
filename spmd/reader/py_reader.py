"""The reader variables of fluid.layers.py_reader / create_py_reader_by_data: a reader made
before its data variables exist; fluid.layers.read_file makes them and binds a non-iterable
loader to them (the program's runs then take its batches until fluid.core.EOFException)."""
from __future__ import annotations

import numbers

from ..core import unique_name
from ..core.dtypes import convert_dtype
from ..core.variable import Variable, normalize_shape
from ..errors import InvalidArgumentError, PreconditionError
from .feed_queue import FeedQueue
from .loader import GeneratorLoader

__all__: list[str] = []


class PyReaderVariable:
    """What fluid.layers.py_reader returns: read it with fluid.layers.read_file, give it a
    source (decorate_paddle_reader / decorate_sample_list_generator for lists of samples,
    decorate_tensor_provider / decorate_batch_generator for batches of arrays), then start()
    and reset() around each epoch.

    >>> # reader = fluid.layers.py_reader(capacity=8, shapes=[(-1, 784), (-1, 1)],
    >>> #                                 dtypes=["float32", "int64"])
    >>> # img, label = fluid.layers.read_file(reader)
    """

    def __init__(self, capacity, shapes, dtypes, lod_levels=None, name=None,
                 use_double_buffer=True):
        if not isinstance(capacity, numbers.Integral) or capacity <= 0:
            raise InvalidArgumentError(f"py_reader: capacity must be an int > 0, got {capacity!r}")
        if len(shapes) != len(dtypes):
            raise InvalidArgumentError(
                f"py_reader: {len(shapes)} shape(s) but {len(dtypes)} dtype(s); give one of "
                f"each per variable read")
        lod_levels = [0] * len(shapes) if lod_levels is None else list(lod_levels)
        if len(lod_levels) != len(shapes):
            raise InvalidArgumentError(
                f"py_reader: {len(shapes)} shape(s) but {len(lod_levels)} lod_levels; give "
                f"one per variable read")
        self.lod_levels = [int(level) for level in lod_levels]
        # fluid's names: the reader it returns is the double-buffer one when use_double_buffer
        self._base_name, double_name = _reader_names(name)
        self.name = double_name if use_double_buffer else self._base_name
        self.shapes = [normalize_shape(s, self.name) for s in shapes]
        self.dtypes = [convert_dtype(d) for d in dtypes]
        self.capacity = int(capacity)
        self.use_double_buffer = bool(use_double_buffer)
        self.stop_gradient = True
        self.persistable = True
        self._loader: GeneratorLoader | None = None
        self._source = None  # (setter name, reader) given before read_file
        self._queue: FeedQueue | None = None
        self.exited = False  # fluid's flag, set by programs before joining `thread`
        _add_reader_ops(self)

    @property
    def queue(self) -> FeedQueue:
        """The queue a program pushes its batches into itself (fluid's
        LoDTensorBlockingQueue): `queue.push(tensor_array)` per batch, `queue.close()` at the
        end of the data; the runs reading this reader take them, without start()."""
        if self._queue is None:
            self._queue = FeedQueue(self.capacity)
            if self._loader is not None:
                self._loader._feed_from(self._queue)
        return self._queue

    @property
    def thread(self):
        """The thread reading the decorated source (None before start())."""
        return None if self._loader is None else self._loader._thread

    def _bind(self, out_vars: list[Variable]):
        if self._loader is not None:
            raise PreconditionError(
                f"read_file was already called on the reader '{self.name}'; call it once and "
                f"reuse the variables it returned")
        self._loader = GeneratorLoader(out_vars, self.capacity, self.use_double_buffer,
                                       iterable=False)
        if self._queue is not None:
            self._loader._feed_from(self._queue)
        if self._source is not None:
            getattr(self._loader, self._source[0])(self._source[1])

    def _set(self, setter: str, reader):
        if self._loader is None:
            self._source = (setter, reader)
        else:
            getattr(self._loader, setter)(reader)

    def decorate_paddle_reader(self, reader, places=None):
        """Source: a creator of lists of samples (paddle.batch(...))."""
        self._set("set_sample_list_generator", reader)

    decorate_sample_list_generator = decorate_paddle_reader

    def decorate_tensor_provider(self, reader, places=None):
        """Source: a creator of batches, each a list of arrays in the read order."""
        self._set("set_batch_generator", reader)

    decorate_batch_generator = decorate_tensor_provider

    def _bound(self, what: str) -> GeneratorLoader:
        if self._loader is None:
            raise PreconditionError(
                f"py_reader '{self.name}': {what}() before fluid.layers.read_file(reader): "
                f"read the reader's variables first")
        return self._loader

    def start(self):
        """Start reading; the following runs take its batches."""
        self._bound("start").start()

    def reset(self):
        """End the epoch after fluid.core.EOFException."""
        self._bound("reset").reset()


def _reader_names(name) -> tuple[str, str]:
    """(the reader's name, its double buffer's)."""
    if name:
        return f"{name}_reader", f"{name}_double_buffer"
    # fluid draws both names in either case, so the counters advance as in fluid
    return unique_name.generate("create_py_reader"), unique_name.generate("double_buffer")


def _add_reader_ops(reader) -> None:
    """fluid's reader variables and ops: `create_py_reader` in the startup program, a
    `create_double_buffer_reader` in the main one (with use_double_buffer). They mark where
    the program reads; the data comes through the reader's run hook."""
    from ..core.program import default_main_program, default_startup_program

    startup = default_startup_program().global_block()
    main = default_main_program().global_block()
    for block in (startup, main):
        if not block.has_var(reader._base_name):
            block.create_var(name=reader._base_name, type="READER", persistable=True)
    startup.append_op("create_py_reader", outputs={"Out": [reader._base_name]},
                      attrs={"capacity": reader.capacity, "lod_levels": reader.lod_levels})
    if reader.use_double_buffer:
        main.create_var(name=reader.name, type="READER", persistable=True)
        main.append_op("create_double_buffer_reader",
                       inputs={"UnderlyingReader": [reader._base_name]},
                       outputs={"Out": [reader.name]})


def read_reader(reader: PyReaderVariable, block) -> list[Variable]:
    """read_file's work: one data variable per slot of `reader`, bound to it."""
    if not isinstance(reader, PyReaderVariable):
        raise InvalidArgumentError(
            f"read_file expects a reader made by fluid.layers.py_reader / "
            f"create_py_reader_by_data / double_buffer, got {type(reader).__name__}")
    base = unique_name.generate("read_file")
    out = [block.create_var(name=f"{base}.tmp_{i}", shape=shape, dtype=dtype, is_data=True,
                            stop_gradient=True, lod_level=level)
           for i, (shape, dtype, level) in enumerate(zip(reader.shapes, reader.dtypes,
                                                        reader.lod_levels))]
    reader._bind(out)
    if block.has_var(reader.name):  # fluid's read op: the batch's variables come from here
        block.append_op("read", inputs={"Reader": [reader.name]},
                        outputs={"Out": [v.name for v in out]})
    return out
