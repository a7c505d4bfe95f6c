"""fluid.layers.utils: the nested-structure helpers fluid 1.8's RNN API and programs use
(flatten, pack_sequence_as, map_structure, assert_same_structure, ...) and convert_to_list.

>>> flatten([1, (2, {"b": 4, "a": 3})])
[1, 2, 3, 4]
>>> convert_to_list(3, 2, "stride")
[3, 3]
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

from ...errors import InvalidArgumentError
from ...layers.rnn_nest import describe, flatten, map_structure, pack_sequence_as

__all__ = ["assert_same_structure", "convert_to_list", "copy_mutable_vars", "flatten",
           "hold_mutable_vars", "is_sequence", "map_structure", "pack_sequence_as"]


def is_sequence(seq) -> bool:
    """Whether `seq` is a nested structure (a dict, or a sequence other than a string)."""
    if isinstance(seq, dict):
        return True
    return isinstance(seq, Sequence) and not isinstance(seq, (str, bytes))


def convert_to_list(value, n: int, name: str, dtype=int) -> list:
    """`value` (one number, or `n` of them) as a list of `n` numbers of `dtype`; a wrong type
    or length is a ValueError naming the argument."""
    if isinstance(value, dtype) and not isinstance(value, bool):
        return [value] * n
    try:
        values = list(value)
    except TypeError:
        raise InvalidArgumentError(
            f"The {name}'s type must be list or tuple. Received: {value}") from None
    if len(values) != n:
        raise InvalidArgumentError(f"The {name}'s length must be {n}. Received: {value}")
    for v in values:
        try:
            dtype(v)
        except (ValueError, TypeError):
            raise InvalidArgumentError(
                f"The {name}'s type must be a list or tuple of {n} {dtype.__name__}. "
                f"Received: {value} including element {v!r} of type {type(v).__name__}"
            ) from None
    return values


def hold_mutable_vars(structure) -> bool:
    """Whether any entry of `structure` is itself a list, tuple or dict."""
    return any(is_sequence(s) for s in structure)


def copy_mutable_vars(structure):
    """A copy of `structure`'s lists, tuples and dicts holding the same leaves."""
    return pack_sequence_as(structure, copy.copy(flatten(structure)))


def _assert_same(a, b, check_types: bool) -> None:
    if is_sequence(a) != is_sequence(b):
        raise InvalidArgumentError(
            f"The two structures don't have the same nested structure: {describe(a)} and "
            f"{describe(b)}")
    if not is_sequence(a):
        return
    if check_types and type(a) is not type(b):
        raise TypeError(
            f"The two structures don't have the same sequence type: {type(a).__name__} and "
            f"{type(b).__name__}")
    if isinstance(a, dict) and check_types and set(a) != set(b):
        raise InvalidArgumentError(
            f"The two dictionaries don't have the same set of keys: {sorted(a)} and "
            f"{sorted(b)}")
    kids_a = [a[k] for k in sorted(a)] if isinstance(a, dict) else list(a)
    kids_b = [b[k] for k in sorted(b)] if isinstance(b, dict) else list(b)
    for x, y in zip(kids_a, kids_b):
        _assert_same(x, y, check_types)


def assert_same_structure(nest1, nest2, check_types: bool = True) -> None:
    """Raise ValueError (TypeError for a different sequence type, with check_types) unless
    the two structures nest the same way with the same number of leaves."""
    n1 = len(flatten(nest1)) if is_sequence(nest1) else 1
    n2 = len(flatten(nest2)) if is_sequence(nest2) else 1
    if n1 != n2:
        raise InvalidArgumentError(
            f"The two structures don't have the same number of elements: {n1} "
            f"({describe(nest1)}) and {n2} ({describe(nest2)})")
    _assert_same(nest1, nest2, check_types)
