"""Record: the small part of a dataclass spmd's records need (equality and repr over their
fields), for classes made at `import spmd`. `import dataclasses` (with inspect) and the making
of each dataclass cost every rank's start-up several milliseconds (bench/startup.py), where a
plain class with `__slots__` and an `__init__` costs next to nothing. A subclass names its
fields in `__slots__`, sets `_fields = __slots__`, writes its `__init__`, and defines `__hash__`
when it is immutable by use (else sets `__hash__ = None`)."""
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
