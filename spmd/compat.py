"""paddle.compat: string and number helpers fluid 1.x programs call (to_text, to_bytes,
round, floor_division, get_exception_message, long_type), with fluid's Python 3 behaviour.

>>> import spmd.compat as cpt
>>> cpt.to_text(b"abc"), cpt.round(2.5), cpt.floor_division(7, 2)
('abc', 3.0, 3)
"""
from __future__ import annotations

import math

__all__ = ["long_type", "to_text", "to_bytes", "round", "floor_division",
           "get_exception_message"]

int_type = int
long_type = int


def _convert(obj, one, inplace: bool):
    """Apply `one` to obj, or to each item of a list or set (and keys and values of a dict,
    for to_text); with `inplace` the container itself is changed and returned."""
    if obj is None:
        return obj
    if isinstance(obj, list):
        if not inplace:
            return [one(item) for item in obj]
        obj[:] = [one(item) for item in obj]
        return obj
    if isinstance(obj, set):
        converted = {one(item) for item in obj}
        if not inplace:
            return converted
        obj.clear()
        obj.update(converted)
        return obj
    return one(obj)


def _text(obj, encoding):
    if isinstance(obj, bytes):
        return obj.decode(encoding)
    if obj is None or isinstance(obj, (str, bool, float)):
        return obj
    return str(obj)


def _bytes(obj, encoding):
    if isinstance(obj, str):
        return obj.encode(encoding)
    return obj


def to_text(obj, encoding: str = "utf-8", inplace: bool = False):
    """bytes decoded to str (items of a list, set or dict too); str, bool, float unchanged.

    >>> to_text([b"a", "b"])
    ['a', 'b']
    """
    if isinstance(obj, dict):
        new = {_text(k, encoding): _text(v, encoding) for k, v in obj.items()}
        if inplace:
            obj.update(new)
            return obj
        return new
    return _convert(obj, lambda item: _text(item, encoding), inplace)


def to_bytes(obj, encoding: str = "utf-8", inplace: bool = False):
    """str encoded to bytes (items of a list or set too); bytes unchanged.

    >>> to_bytes(["a", b"b"])
    [b'a', b'b']
    """
    return _convert(obj, lambda item: _bytes(item, encoding), inplace)


def round(x, d: int = 0) -> float:  # noqa: A001 - fluid's name
    """Round half away from zero (Python 3's round goes to even), to `d` decimals.

    >>> round(0.5), round(-0.5), round(1.5)
    (1.0, -1.0, 2.0)
    """
    p = 10 ** d
    if x > 0.0:
        return float(math.floor(x * p + 0.5)) / p
    if x < 0.0:
        return float(math.ceil(x * p - 0.5)) / p
    return math.copysign(0.0, x)


def floor_division(x, y):
    """x // y.

    >>> floor_division(-7, 2)
    -4
    """
    return x // y


def get_exception_message(exc) -> str:
    """The message of an exception: str(exc).

    >>> get_exception_message(ValueError("bad"))
    'bad'
    """
    if exc is None:
        from .errors import InvalidArgumentError

        raise InvalidArgumentError("get_exception_message needs an exception, got None")
    return str(exc)
