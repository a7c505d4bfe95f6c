"""Scope: where variables' values live between runs (name -> array), and fluid's tensor views."""
from __future__ import annotations

import contextlib

import numpy as np

from ..errors import InvalidArgumentError
from .places import host_array  # noqa: F401 - where most callers import it from


class Tensor:
    """fluid's LoDTensor view of one scope entry: `set`, `shape`, `numpy.array(tensor)`."""

    def __init__(self, scope: Scope, name: str):
        self._scope, self._name = scope, name

    def _array(self):
        return self._scope._arrays.get(self._name)

    def _is_initialized(self) -> bool:
        """Whether the entry holds a value (fluid: whether the tensor holds memory)."""
        return self._array() is not None

    def set(self, array, place=None):
        from .places import array_module

        xp = array_module(place) if place is not None else np
        self._scope._arrays[self._name] = xp.array(array, copy=True)

    def shape(self):
        """The value's dims; [0] without a value, as fluid's tensor reports."""
        a = self._array()
        return list(a.shape) if a is not None else [0]

    _get_dims = shape  # fluid's pybind name (PaddleRec's set_zero: np.zeros(t._get_dims()))

    def _place(self):
        """The place of the value: CPUPlace for a host array, CUDAPlace(i) for a device's."""
        from .lod import place_of

        return place_of(self._array())

    def _clear(self) -> None:
        """Drop the value: the variable stays, uninitialized (fluid frees the memory and
        keeps the dims; spmd's dims are the value's, so they read [0] again)."""
        self._scope._arrays[self._name] = None

    def _copy(self, place=None):
        """A LoDTensor holding a copy of the value and its LoD, on `place`."""
        from .lod import LoDTensor

        return LoDTensor(self._array(), self._scope.lod(self._name))._copy(place)

    def _dtype(self):
        """fluid's VarType of the value (it also equals the dtype's name)."""
        from .dtypes import VarType, convert_dtype

        name = convert_dtype(self._array().dtype)
        return next((v for v in VarType if v == name), self._array().dtype)

    def _set_dims(self, shape) -> None:
        """Give the tensor `shape` (fluid's Resize): zeros of that shape where the value has
        another shape or none yet; `set` then writes the data."""
        from .lod import resized

        self._scope._arrays[self._name] = resized(self._array(), shape)

    def _get_float_element(self, i: int) -> float:
        """Element `i` of the flattened value (fluid's tensor element accessors)."""
        return float(np.asarray(self).reshape(-1)[i])

    _get_double_element = _get_float_element

    def _set_float_element(self, i: int, value: float) -> None:
        a = self._array()
        if not isinstance(a, np.ndarray) or not a.flags.writeable or not a.flags.c_contiguous:
            a = np.array(np.asarray(self), copy=True)  # a view or a device array: our own copy
            self._scope._arrays[self._name] = a
        a.reshape(-1)[i] = value

    _set_double_element = _set_float_element

    def __array__(self, dtype=None, copy=None):
        a = self._array()
        if a is None:
            raise InvalidArgumentError(f"variable '{self._name}' holds no value yet")
        return host_array(a, dtype, copy)

    def numpy(self):
        return np.array(self)

    def lod(self) -> list[list[int]]:
        from .lod import lod_as_lists

        return lod_as_lists(self._scope.lod(self._name))

    def set_lod(self, lod):
        from .lod import LoDTensor

        t = LoDTensor(self._array())
        t.set_lod(lod)
        self._scope.set_lod(self._name, t.lod_value)

    def recursive_sequence_lengths(self) -> list[list[int]]:
        from .lod import offsets_to_lengths

        return offsets_to_lengths(self.lod())

    def set_recursive_sequence_lengths(self, lengths):
        from .lod import LoDTensor

        t = LoDTensor(self._array())
        t.set_recursive_sequence_lengths(lengths)
        self._scope.set_lod(self._name, t.lod_value)

    def has_valid_recursive_sequence_lengths(self) -> bool:
        from .lod import LoDTensor

        return LoDTensor(self._array(), self._scope.lod(self._name)
                         ).has_valid_recursive_sequence_lengths()

    def __repr__(self):
        return f"Tensor({self._name}, shape={self.shape()})"


class ScopeVar:
    """What `scope.find_var(name)` returns; `get_tensor()` is how fluid code reaches the value."""

    def __init__(self, scope: Scope, name: str):
        self._scope, self._name = scope, name

    def get_tensor(self) -> Tensor:
        return Tensor(self._scope, self._name)

    def is_initialized(self) -> bool:
        return self._name in self._scope._arrays

    def get_lod_tensor_array(self) -> list:
        """The list of LoDTensors this variable holds (fluid's LoDTensorArray / fetch list;
        core.set_feed_variable and get_fetch_variable use the same lists). A tensor array a
        run left here (a persistable one) is handed out as a LoDTensorArray of its elements,
        each with its LoD: a snapshot of that run's value."""
        value = self._scope.get(self._name)
        if isinstance(value, list):
            from .lod import LoDTensor, LoDTensorArray

            lods = self._scope.lod(self._name)
            lods = lods if isinstance(lods, list) else [None] * len(value)
            return LoDTensorArray(v if isinstance(v, LoDTensor) else LoDTensor(v, lod)
                                  for v, lod in zip(value, lods))
        return self._scope.tensor_list(self._name)

    get_fetch_list = get_lod_tensor_array

    def get_lod_rank_table(self):
        """The LoDRankTable a lod_rank_table op left here (`.items()`, as fluid's)."""
        return self._scope.get(self._name)


class Scope:
    """A name -> array map; kid scopes see their parent's names."""

    def __init__(self, parent: Scope | None = None):
        self._parent = parent
        self._arrays: dict = {}
        self._lods: dict = {}  # name -> LoD (spmd/core/lod.py) of the LoD tensors among them
        self._kids: list[Scope] = []

    def var(self, name: str) -> ScopeVar:
        """The variable `name` of this scope, made here (with no value yet) if missing."""
        self.__dict__.setdefault("_declared", set()).add(name)
        return ScopeVar(self, name)

    def find_var(self, name: str) -> ScopeVar | None:
        """The variable `name` of this scope or an ancestor (one holding a value, or one made
        by `var`, as fluid's Scope.FindVar), else None."""
        scope = self._owner(name)
        if scope is None:
            scope = self
            while scope is not None and name not in scope.__dict__.get("_declared", ()):
                scope = scope._parent
        return ScopeVar(scope, name) if scope is not None else None

    def _owner(self, name: str):
        scope = self
        while scope is not None:
            if name in scope._arrays:
                return scope
            scope = scope._parent
        return None

    def get(self, name: str):
        """The array under `name` (searching parents), or None."""
        array = self._arrays.get(name)  # (where it mostly is: one lookup, every run, per read)
        if array is not None:
            return array
        scope = self._owner(name)
        return scope._arrays[name] if scope is not None else None

    def lod(self, name: str):
        """The LoD of the tensor under `name` (searching parents), or None."""
        scope = self._owner(name)
        return scope._lods.get(name) if scope is not None else None

    def set_lod(self, name: str, lod) -> None:
        """Give the tensor under `name` the LoD `lod` (None: none), where it lives."""
        owner = self._owner(name) or self
        if lod is None:
            owner._lods.pop(name, None)
        else:
            owner._lods[name] = lod

    def tensor_list(self, name: str) -> list:
        """The list of tensors held under `name` (feed / fetch holders, tensor arrays)."""
        lists = self.__dict__.setdefault("_tensor_lists", {})
        return lists.setdefault(name, [])

    def new_scope(self) -> Scope:
        kid = Scope(self)
        self._kids.append(kid)
        return kid

    def drop_kids(self):
        self._kids.clear()

    def local_var_names(self) -> list[str]:
        return list(self._arrays)

    def put(self, name: str, array) -> None:
        """Store `array` (numpy or cupy, not copied) under `name` in this scope."""
        self._arrays[name] = array

    def erase(self, names):
        for n in names:
            self._arrays.pop(n, None)
            self._lods.pop(n, None)

    def _assign(self, name: str, array):
        """Store `array` under `name` in the scope that already holds `name` (a parent's
        parameter is updated where it lives, not shadowed by a kid), else in this scope."""
        arrays = self._arrays
        if name in arrays:  # (where it mostly is: no search, every run, per write)
            arrays[name] = array
            return
        owner = self._owner(name) or self
        owner._arrays[name] = array


_global_scope = Scope()


def global_scope() -> Scope:
    return _global_scope


@contextlib.contextmanager
def scope_guard(scope: Scope):
    global _global_scope
    old, _global_scope = _global_scope, scope
    try:
        yield
    finally:
        _global_scope = old
