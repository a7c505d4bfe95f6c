"""Record: the small part of a dataclass spmd's records need (equality and repr over their
fields), for classes made at `import spmd`. `import dataclasses` (7.3 ms with inspect) and the
making of each dataclass (about 1 ms for a frozen one of a few fields) cost every rank's
start-up (`python -X importtime`), where a plain class with `__slots__` and an `__init__` costs
next to nothing. A subclass names its fields in `__slots__`, sets `_fields = __slots__` and
writes its `__init__`, with its defaults (a mutable one as None, made anew there, as a
dataclass's default_factory). A Record is unhashable (it defines equality); a FrozenRecord
hashes by its fields and is never changed after it is made.

`class R(FrozenRecord, frozen=True)` also refuses it, as a frozen dataclass does: assigning or
deleting an attribute raises FrozenError, so its `__init__` sets each field with
`object.__setattr__` (what a frozen dataclass's own does, at the same cost) and takes the
fields positionally in their order (copy and pickle remake one by it). It is a keyword,
not the default, because a check of every assignment (allowing the first) would cost the
classes assigning in `__init__` (ops/registry.py's Slot, made ~650 times a start-up) 0.7 us a
field."""
from __future__ import annotations


class FrozenError(AttributeError):
    """An assignment to, or deletion of, an attribute of a FrozenRecord made with frozen=True
    (a frozen dataclass's FrozenInstanceError, also an AttributeError)."""


class Record:
    """Equality and repr over the class's `_fields`."""

    __slots__ = ()
    _fields: tuple = ()

    def _values(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"


def _refuse_set(self, name, value):
    raise FrozenError(f"cannot assign to field {name!r}: a {type(self).__name__} is never "
                      f"changed after it is made")


def _refuse_delete(self, name):
    raise FrozenError(f"cannot delete field {name!r}: a {type(self).__name__} is never "
                      f"changed after it is made")


def _reduce(self):
    """copy, deepcopy and pickle remake a frozen one by its `__init__` (its fields, in order),
    as setting the fields of an empty one would be refused."""
    return type(self), self._values()


class FrozenRecord(Record):
    """A Record never changed after it is made: hashable by its fields (set and dict keys)."""

    __slots__ = ()

    def __init_subclass__(cls, frozen: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        if frozen:
            cls.__setattr__, cls.__delattr__ = _refuse_set, _refuse_delete
            cls.__reduce__ = _reduce

    def __hash__(self):
        return hash(self._values())
