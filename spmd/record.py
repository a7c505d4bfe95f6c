"""Record: the small part of a dataclass spmd's records need (equality and repr over their
fields), for classes made at `import spmd`. `import dataclasses` (7.3 ms with inspect) and the
making of each dataclass (about 1 ms for a frozen one of a few fields) cost every rank's
start-up (`python -X importtime`), where a plain class with `__slots__` and an `__init__` costs
next to nothing. A subclass names its fields in `__slots__`, sets `_fields = __slots__` and
writes its `__init__`; a Record is unhashable (it defines equality), a FrozenRecord hashes by
its fields and is never changed after it is made."""
from __future__ import annotations


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


class FrozenRecord(Record):
    """A Record never changed after it is made: hashable by its fields (set and dict keys)."""

    __slots__ = ()

    def __hash__(self):
        return hash(self._values())
