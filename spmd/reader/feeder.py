"""fluid.DataFeeder: turns a minibatch (a list of samples, each a tuple of fields in feed_list
order) into the feed dict name -> array, with each data variable's dtype and shape."""
from __future__ import annotations

import numpy as np

from ..core.lod import create_lod_tensor
from ..core.places import CUDAPlace
from ..core.program import default_main_program
from ..core.variable import Variable
from ..errors import InvalidArgumentError
from ..flags import flags

__all__ = ["DataFeeder"]


def _shape_text(shape) -> str:
    return "[" + ", ".join("None" if d < 0 else str(d) for d in shape) + "]"


class _Slot:
    """One data variable's column of a minibatch, converted as fluid's converter does: the
    stacked samples cast to the variable's dtype, reshaped to its shape when their rank
    differs (so scalar labels fill a [-1, 1] variable), checked against its fixed dims."""

    def __init__(self, name: str, shape, dtype: str, lod_level: int):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype
        self.lod_level = int(lod_level)

    def convert(self, column: list, where: str):
        """The column as an array, or for a LoD variable a LoDTensor: each sample is then a
        sequence (nested lod_level deep) whose elements are laid end to end, as fluid's
        DataFeeder does."""
        if not self.lod_level:
            return self._dense(column, where)
        lengths: list[list[int]] = [[] for _ in range(self.lod_level)]
        elements = column
        for depth in range(self.lod_level):
            flat = []
            for i, seq in enumerate(elements):
                if not hasattr(seq, "__len__") or isinstance(seq, (str, bytes)):
                    raise InvalidArgumentError(
                        f"{where}: variable '{self.name}' has lod_level={self.lod_level}, so "
                        f"each sample must be a sequence nested {self.lod_level} deep; got "
                        f"{type(seq).__name__} at depth {depth} (item {i})")
                lengths[depth].append(len(seq))
                flat.extend(seq)
            elements = flat
        return create_lod_tensor(self._dense(elements, where), lengths, None)

    def _dense(self, column: list, where: str) -> np.ndarray:
        try:
            array = np.array(column, dtype=self.dtype)
        except (TypeError, ValueError) as e:
            raise self._column_error(column, where, e) from None
        shape = self.shape
        # fluid reshapes only when at most one dim is unknown: the shape is then a full target
        if shape and array.ndim != len(shape) and sum(d < 0 for d in shape) <= 1:
            try:
                array = array.reshape(shape)
            except ValueError:
                raise InvalidArgumentError(
                    f"{where}: variable '{self.name}' has shape {_shape_text(shape)}, the "
                    f"{len(column)} sample(s) stack to {list(array.shape)}, which cannot be "
                    f"reshaped to it; give each sample {_shape_text(shape[1:])} values") from None
        if shape and array.ndim == len(shape) and any(
                e >= 0 and e != g for e, g in zip(shape, array.shape)):
            raise InvalidArgumentError(
                f"{where}: variable '{self.name}' expects shape {_shape_text(shape)} (None = any "
                f"size), the samples stack to {list(array.shape)}")
        return array

    def _column_error(self, column: list, where: str, err: Exception) -> Exception:
        shapes = [_sample_shape(value) for value in column]
        for i, got in enumerate(shapes):
            if got != shapes[0]:
                return InvalidArgumentError(
                    f"{where}: variable '{self.name}': sample {i} has shape {got}, sample 0 "
                    f"has {shapes[0]}; every sample must give it the same shape")
        return InvalidArgumentError(
            f"{where}: variable '{self.name}': cannot convert the samples to a {self.dtype} "
            f"array ({err}); give numbers or numeric numpy arrays")


def _sample_shape(value) -> str:
    try:
        return str(list(np.shape(value)))
    except ValueError:  # numpy refuses nested lists of unequal lengths
        return "a ragged nested list"


class DataFeeder:
    """Converts minibatches for `Executor.run(feed=...)`: `feed_list` names the data variables
    (Variables or names looked up in `program`, default the default main program) in the
    order of each sample's fields.

    >>> import spmd.fluid as fluid
    >>> with fluid.program_guard(fluid.Program(), fluid.Program()):
    ...     x = fluid.layers.data(name="x", shape=[2])
    ...     y = fluid.layers.data(name="y", shape=[1], dtype="int64")
    ...     feeder = DataFeeder(feed_list=[x, y], place=fluid.CPUPlace())
    >>> out = feeder.feed([([1, 2], 0), ([3, 4], 1)])
    >>> out["x"].shape, out["y"].shape, out["y"].dtype.name
    ((2, 2), (2, 1), 'int64')
    """

    def __init__(self, feed_list, place, program=None):
        program = default_main_program() if program is None else program
        self.feed_names, self.feed_shapes, self.feed_dtypes, self.feed_lod_level = [], [], [], []
        for var in feed_list:
            if isinstance(var, str):
                var = program.global_block().var(var)
            if not isinstance(var, Variable):
                raise InvalidArgumentError(
                    f"DataFeeder: feed_list must hold data Variables (or their names), got "
                    f"{type(var).__name__}")
            self.feed_names.append(var.name)
            self.feed_shapes.append(tuple(var.shape))  # tuples, as fluid's var.shape
            self.feed_dtypes.append(var.dtype)
            self.feed_lod_level.append(var.lod_level)
        self.place = place

    def _slots(self) -> list[_Slot]:
        return [_Slot(*spec) for spec in zip(self.feed_names, self.feed_shapes,
                                             self.feed_dtypes, self.feed_lod_level)]

    def feed(self, iterable) -> dict:
        """One minibatch (an iterable of samples) -> {name: array}.

        >>> # exe.run(main, feed=feeder.feed(minibatch), fetch_list=[loss])
        """
        slots = self._slots()
        columns: list[list] = [[] for _ in slots]
        for i, sample in enumerate(iterable):
            # fluid needs only len() and iteration: tuples, lists, and ndarray rows alike
            sized = hasattr(sample, "__len__") and hasattr(sample, "__iter__") and \
                not isinstance(sample, (str, bytes))
            if not sized or len(sample) != len(slots):
                got = (f"has {len(sample)} field(s)" if sized else
                       f"is a {type(sample).__name__}, not a sequence of fields")
                raise InvalidArgumentError(
                    f"DataFeeder.feed: sample {i} {got}; feed_list has {len(slots)} "
                    f"({self.feed_names}): each sample must hold one field per fed variable, "
                    f"in feed_list order")
            for column, value in zip(columns, sample):
                column.append(value)
        return {slot.name: slot.convert(column, "DataFeeder.feed")
                for slot, column in zip(slots, columns)}

    def feed_parallel(self, iterable, num_places=None):
        """One minibatch per place -> a generator of one feed dict per place.

        >>> # exe.run(compiled, feed=list(feeder.feed_parallel([b0, b1], 2)))
        """
        count = self._number_of_places(num_places)
        batches = list(iterable)
        if len(batches) != count:
            raise InvalidArgumentError(
                f"DataFeeder.feed_parallel takes one minibatch per place: {count} place(s), "
                f"got {len(batches)} minibatch(es)")
        for minibatch in batches:
            yield self.feed(minibatch)

    def _number_of_places(self, num_places) -> int:
        if num_places is not None:
            return int(num_places)
        if isinstance(self.place, CUDAPlace):
            return 1  # spmd runs one process per GPU
        return flags().cpu_num

    def decorate_reader(self, reader, multi_devices, num_places=None, drop_last=True):
        """A reader creator of feed dicts from a minibatch reader; with multi_devices, of
        lists of one feed dict per place (left-over minibatches that do not fill every place
        are dropped; drop_last=False refuses them, as fluid).

        >>> # for feed in feeder.decorate_reader(paddle.batch(r, 8), multi_devices=False)():
        """
        def feeds():
            if not multi_devices:
                for minibatch in reader():
                    yield self.feed(minibatch)
                return
            count = self._number_of_places(num_places)
            pending = []
            for minibatch in reader():
                pending.append(minibatch)
                if len(pending) == count:
                    yield list(self.feed_parallel(pending, count))
                    pending = []
            if pending and not drop_last:
                raise InvalidArgumentError(
                    f"DataFeeder.decorate_reader: {len(pending)} minibatch(es) left over for "
                    f"{count} places; pass drop_last=True to drop them")

        return feeds

