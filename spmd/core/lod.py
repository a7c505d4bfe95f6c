"""LoD (level of detail): how fluid packs variable-length sequences into one tensor.

A LoD tensor is a plain array whose rows are the elements of all sequences laid end to end,
plus its LoD: one or more levels of offsets. `[[0, 2, 5]]` says rows 0-1 are the first
sequence and rows 2-4 the second; with two levels, the first level's offsets index the second
level's sequences (paragraphs of sentences of words). fluid users also give LoD as
"recursive sequence lengths": `[[2, 3]]` is the same LoD as `[[0, 2, 5]]`.

At run time a LoD is a tuple of levels, each a read-only int64 numpy array of offsets (host
memory, whatever the place of the data): `Lod = tuple[np.ndarray, ...]`; None means "no LoD".
In a plan, the LoD of variable `x` travels beside its array under `lod_key("x")`, and a kernel
that reads or writes LoD sees it under the slot name plus LOD_SUFFIX (`ins["X@LOD"]`).

>>> t = create_lod_tensor(np.arange(5.0).reshape(5, 1), [[2, 3]], None)
>>> t.lod(), t.recursive_sequence_lengths()
([[0, 2, 5]], [[2, 3]])
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import InvalidArgumentError
from .places import host_array

__all__ = ["LOD_SUFFIX", "LoDTensor", "LoDTensorArray", "check_lod", "create_lod_tensor",
           "create_random_int_lodtensor", "lengths_to_offsets", "lod_key", "make_lod",
           "offsets_to_lengths", "lod_as_lists", "sequence_rows", "split_by_sequences"]

LOD_SUFFIX = "@LOD"


def lod_key(name: str) -> str:
    """The name a variable's LoD travels under in a plan's values (and a kernel's slots)."""
    return name + LOD_SUFFIX


def _level(offsets) -> np.ndarray:
    level = np.array(offsets, dtype=np.int64).reshape(-1)
    level.flags.writeable = False
    return level


def make_lod(levels) -> tuple | None:
    """A run-time LoD from fluid's list of offset levels (`[[0, 2, 5]]`), or None for an
    empty one."""
    if levels is None:
        return None
    if isinstance(levels, tuple) and all(isinstance(lv, np.ndarray) for lv in levels):
        return levels or None
    levels = [_level(lv) for lv in levels]
    return tuple(levels) or None


def lengths_to_offsets(lengths: Sequence[Sequence[int]]) -> list[list[int]]:
    """fluid's recursive sequence lengths to its offset LoD: [[2, 3]] -> [[0, 2, 5]]."""
    return [[0] + np.cumsum(np.asarray(level, dtype=np.int64)).tolist() for level in lengths]


def offsets_to_lengths(offsets: Sequence[Sequence[int]]) -> list[list[int]]:
    """The inverse of lengths_to_offsets: [[0, 2, 5]] -> [[2, 3]]."""
    return [np.diff(np.asarray(level, dtype=np.int64)).tolist() for level in offsets]


def lod_as_lists(lod) -> list[list[int]]:
    """A run-time LoD as fluid prints and returns it: a list of lists of offsets."""
    return [] if lod is None else [level.tolist() for level in lod]


def lod_problem(lod, rows: int) -> str | None:
    """Why `lod` (a run-time LoD) cannot describe a tensor of `rows` rows, or None when it
    can. fluid's rules: every level starts at 0 and never decreases; a level's last offset is
    the number of sequences of the level below it, and the last level's is the row count."""
    for i, level in enumerate(lod):
        if level.size < 1 or level[0] != 0:
            return f"level {i} {level.tolist()} must start at offset 0"
        if np.any(np.diff(level) < 0):
            return f"level {i} {level.tolist()} decreases; offsets must never decrease"
        below = rows if i == len(lod) - 1 else lod[i + 1].size - 1
        if level[-1] != below:
            what = (f"the tensor's {rows} rows" if i == len(lod) - 1
                    else f"the {below} sequences of level {i + 1}")
            return (f"level {i} ends at offset {int(level[-1])} but must cover {what}")
    return None


def check_lod(lod, rows: int, where: str, error=InvalidArgumentError) -> None:
    """Raise `error` naming `where` when `lod` cannot describe a tensor of `rows` rows."""
    problem = None if lod is None else lod_problem(lod, rows)
    if problem:
        raise error(
            f"{where}: invalid LoD {lod_as_lists(lod)} for {rows} rows: {problem}. Give "
            f"sequence lengths that add up to the rows, e.g. "
            f"create_lod_tensor(data, [[len(s) for s in sequences]], place)")


def place_of(array):
    """The place an array is on: CUDAPlace(i) for a device array (cupy's), else CPUPlace."""
    from .places import CPUPlace, CUDAPlace

    device = getattr(array, "device", None)
    if device is not None and hasattr(device, "id"):
        return CUDAPlace(device.id)
    return CPUPlace()


def resized(array, dims):
    """`array` where it has shape `dims`, else zeros of that shape (of its dtype, float32 for
    none): fluid's Resize of a tensor, whose `set` then writes the data."""
    if array is None or tuple(array.shape) != tuple(dims):
        return np.zeros(tuple(dims), array.dtype if array is not None else np.float32)
    return array


class LoDTensor:
    """fluid.LoDTensor (fluid.core.LoDTensor): an array with an optional LoD.

    >>> t = LoDTensor()
    >>> t.set(np.ones((3, 2), "float32"), None)
    >>> t.set_recursive_sequence_lengths([[1, 2]])
    >>> t.has_valid_recursive_sequence_lengths(), t.shape()
    (True, [3, 2])
    """

    def __init__(self, array=None, lod=None, place=None):
        if isinstance(array, list) and lod is None:
            # fluid's LoDTensor(recursive_sequence_lengths): no data yet, that LoD
            lengths, array = array, None
            lod = lengths_to_offsets(_checked_levels(lengths, "LoDTensor"))
        self._array = array
        self._lod = make_lod(lod)
        self._where = place  # the place set() was given (None: told by the array's kind)

    # -- data ----------------------------------------------------------------------------------
    def set(self, array, place=None) -> None:
        """Store a copy of `array` (on `place`'s device: numpy on CPU, cupy on a GPU)."""
        from .places import array_module

        xp = array_module(place) if place is not None else np
        self._array = xp.array(array, copy=True)
        self._where = place

    def _copy(self, place=None) -> LoDTensor:
        """A copy of the data and LoD, on `place` (fluid's `Tensor._copy(place)`)."""
        out = LoDTensor(None, self._lod)
        if self._array is not None:
            out.set(self._array, place)
        return out

    def _place(self):
        """The place the data is on (fluid's `t._place()`, compared with `._equals(place)`):
        the one set() was given, else CPUPlace for a numpy array, CUDAPlace(i) for cupy's."""
        return self._where if self._where is not None else place_of(self._array)

    def shape(self) -> list[int]:
        """The data's dims; [0] without data, as fluid's tensor reports."""
        return [0] if self._array is None else list(self._array.shape)

    _get_dims = shape  # fluid's pybind name

    def _is_initialized(self) -> bool:
        """Whether the tensor holds data (fluid: whether it holds memory)."""
        return self._array is not None

    def _set_dims(self, dims) -> None:
        """Give the tensor `dims` (fluid's Resize): see `resized`."""
        self._array = resized(self._array, dims)

    def _dtype(self):
        """fluid's VarType of the data (VarType.FP32, ...; it also equals 'float32'), None
        when there is no data yet."""
        from .dtypes import VarType, convert_dtype

        if self._array is None:
            return None
        try:
            name = convert_dtype(self._array.dtype)
        except InvalidArgumentError:  # a dtype fluid has no VarType for: the numpy one
            return self._array.dtype
        return next(v for v in VarType if v == name)

    def __array__(self, dtype=None, copy=None):
        if self._array is None:
            raise InvalidArgumentError("this LoDTensor holds no data yet: call set(array, place)")
        return host_array(self._array, dtype, copy)

    def numpy(self) -> np.ndarray:
        return np.array(self)

    # fluid's element accessors (Paddle's own tests read LoDTensors one flat element at a time):
    # the data's dtype must be the accessor's, as fluid's enforces
    def _get_float_element(self, index: int) -> float:
        return float(self._flat("float32", "_get_float_element")[index])

    def _get_double_element(self, index: int) -> float:
        return float(self._flat("float64", "_get_double_element")[index])

    def _set_float_element(self, index: int, value: float) -> None:
        self._flat("float32", "_set_float_element")[index] = value

    def _set_double_element(self, index: int, value: float) -> None:
        self._flat("float64", "_set_double_element")[index] = value

    def _flat(self, dtype: str, where: str):
        """A flat view of the data, after checking it holds `dtype`."""
        if self._array is None:
            raise InvalidArgumentError(f"LoDTensor.{where}: this LoDTensor holds no data yet: "
                                       f"call set(array, place) first")
        if self._array.dtype != np.dtype(dtype):
            raise InvalidArgumentError(
                f"LoDTensor.{where}: the data is {self._array.dtype}, this accessor reads "
                f"{dtype}; use the accessor of its dtype or set() an array of {dtype}")
        if not self._array.flags.c_contiguous:  # reshape would copy, and a set be lost
            self._array = self._array.copy()
        return self._array.reshape(-1)

    def __getitem__(self, key):
        """A slice of the data, without the LoD (fluid's `t[0]` gives a plain Tensor; here
        the host array's slice)."""
        return np.asarray(self)[key]

    @property
    def array(self):
        """The data (numpy or cupy), not copied, or None."""
        return self._array

    @property
    def lod_value(self):
        """The run-time LoD (a tuple of offset arrays) or None."""
        return self._lod

    # -- LoD -----------------------------------------------------------------------------------
    def lod(self) -> list[list[int]]:
        return lod_as_lists(self._lod)

    def set_lod(self, lod) -> None:
        self._lod = make_lod(_checked_levels(lod, "LoDTensor.set_lod"))

    def recursive_sequence_lengths(self) -> list[list[int]]:
        return offsets_to_lengths(self.lod())

    def set_recursive_sequence_lengths(self, lengths) -> None:
        levels = _checked_levels(lengths, "LoDTensor.set_recursive_sequence_lengths")
        if any(n < 0 for level in levels for n in level):
            raise InvalidArgumentError(
                f"LoDTensor.set_recursive_sequence_lengths: lengths {levels} include a "
                f"negative length")
        self._lod = make_lod(lengths_to_offsets(levels))

    def has_valid_recursive_sequence_lengths(self) -> bool:
        if self._lod is None:
            return True
        rows = 0 if self._array is None else int(self._array.shape[0]) if self._array.ndim else 1
        return lod_problem(self._lod, rows) is None

    def __repr__(self):
        return f"LoDTensor(shape={self.shape()}, lod={self.lod()})"


def _checked_levels(levels, where: str) -> list[list[int]]:
    """Levels as lists of ints; a 2-D integer numpy array (one row per level) is taken too,
    as fluid's pybind conversion takes it. Floats are refused, as there."""
    if isinstance(levels, np.ndarray):
        if levels.ndim != 2 or levels.dtype.kind not in "iu":
            raise InvalidArgumentError(
                f"{where}: a numpy LoD must be a 2-D integer array (one row per level), got "
                f"{levels.dtype} of shape {list(levels.shape)}")
        levels = list(levels)
    if not isinstance(levels, (list, tuple)) or not all(
            isinstance(level, (list, tuple, range, np.ndarray)) for level in levels):
        raise InvalidArgumentError(
            f"{where}: expected a list of levels, each a list of ints (e.g. [[2, 3]]), got "
            f"{levels!r}")
    for level in levels:
        if isinstance(level, np.ndarray) and level.size and level.dtype.kind not in "iu":
            raise InvalidArgumentError(
                f"{where}: LoD levels must hold ints, got a {level.dtype} array {level!r}")
    return [[int(n) for n in level] for level in levels]


class LoDTensorArray(list):
    """fluid.LoDTensorArray: a list of LoDTensors (what a tensor array variable holds)."""


def create_lod_tensor(data, recursive_seq_lens, place) -> LoDTensor:
    """fluid.create_lod_tensor: a LoDTensor from `data` (a numpy array of all rows, a list of
    sequences of ints, or a LoDTensor) and sequence lengths (`[[2, 3]]`).

    A list of sequences becomes one int64 column of their elements; its lengths must be the
    given ones.

    >>> create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], None).shape()
    [5, 1]
    """
    where = "create_lod_tensor"
    levels = _checked_levels(recursive_seq_lens, where)
    if isinstance(data, LoDTensor):
        data = np.array(data)
    elif isinstance(data, list):
        got = [len(seq) for seq in data]
        if [got] != levels:
            raise InvalidArgumentError(
                f"{where}: the {len(data)} sequences have lengths {got}, but "
                f"recursive_seq_lens is {levels}; give [[len(s) for s in data]]")
        flat = np.concatenate([np.asarray(seq, dtype=np.int64).reshape(-1) for seq in data]
                              ) if data else np.zeros(0, np.int64)
        data = flat.reshape(-1, 1)
    elif not hasattr(data, "shape"):
        raise InvalidArgumentError(
            f"{where}: data must be a numpy array, a list of sequences or a LoDTensor, got "
            f"{type(data).__name__}")
    tensor = LoDTensor()
    tensor.set(data, place)
    tensor.set_recursive_sequence_lengths(levels)
    check_lod(tensor.lod_value, tensor.shape()[0] if tensor.shape() else 0, where)
    return tensor


def create_random_int_lodtensor(recursive_seq_lens, base_shape, place, low, high) -> LoDTensor:
    """fluid.create_random_int_lodtensor: int64 data uniform in [low, high] (both included),
    sum(last level's lengths) rows of `base_shape` each."""
    if not isinstance(base_shape, (list, tuple)):
        raise InvalidArgumentError(
            f"create_random_int_lodtensor: base_shape must be a list, got {base_shape!r}")
    levels = _checked_levels(recursive_seq_lens, "create_random_int_lodtensor")
    shape = [sum(levels[-1]) if levels else 0] + list(base_shape)
    data = np.random.randint(low, high + 1, size=shape).astype(np.int64)
    return create_lod_tensor(data, levels, place)


def sequence_rows(lod, first: int, last: int) -> tuple[int, int, tuple]:
    """Top-level sequences [first, last) of a tensor with run-time LoD `lod`: the row range
    they cover and their own LoD, rebased to start at 0."""
    levels = []
    lo, hi = first, last
    for level in lod:
        part = level[lo:hi + 1]
        levels.append(_level(part - part[0]))
        lo, hi = int(part[0]), int(part[-1])
    return lo, hi, tuple(levels)


def split_by_sequences(tensor: LoDTensor, counts: Sequence[int]) -> list[LoDTensor]:
    """`tensor` cut into consecutive pieces of `counts[i]` top-level sequences each (how a
    LoD batch is dealt out to places and ranks: by sequences, never through one)."""
    pieces, first = [], 0
    for count in counts:
        lo, hi, lod = sequence_rows(tensor.lod_value, first, first + count)
        pieces.append(LoDTensor(tensor.array[lo:hi], lod))
        first += count
    return pieces
