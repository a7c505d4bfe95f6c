"""Nested structures for the RNN API (fluid 1.8's layers.utils.flatten / pack_sequence_as /
map_structure): lists, tuples (namedtuples too) and dicts (in sorted key order) of leaves.

The `*_shapes` forms treat a list or tuple of ints as one leaf (a shape), for cells' state
shapes such as [[hidden], [hidden]].

>>> flatten([1, (2, {"b": 4, "a": 3})])
[1, 2, 3, 4]
>>> map_structure(lambda a, b: a + b, [1, (2,)], [10, (20,)])
[11, (22,)]
"""
from __future__ import annotations

from ..errors import InvalidArgumentError

__all__ = ["describe", "flatten", "flatten_shapes", "map_shapes", "map_structure",
           "pack_sequence_as", "pack_shapes_as", "same_structure"]


def _is_shape(value) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(d, int) and not isinstance(d, bool) for d in value)


def _children(value, leaf) -> list | None:
    if leaf(value):
        return None
    if isinstance(value, dict):
        return [value[k] for k in sorted(value)]
    if isinstance(value, (list, tuple)):
        return list(value)
    return None


def _rebuild(like, items: list):
    if isinstance(like, dict):
        return {k: v for k, v in zip(sorted(like), items)}
    if isinstance(like, tuple) and hasattr(like, "_fields"):  # a namedtuple
        return type(like)(*items)
    return type(like)(items)


def _flatten(value, leaf) -> list:
    kids = _children(value, leaf)
    if kids is None:
        return [value]
    return [v for k in kids for v in _flatten(k, leaf)]


def _pack(like, flat: list, leaf):
    it = iter(flat)

    def build(s):
        kids = _children(s, leaf)
        return next(it) if kids is None else _rebuild(s, [build(k) for k in kids])
    out = build(like)
    if next(it, None) is not None:
        raise InvalidArgumentError(
            f"pack_sequence_as: more values ({len(flat)}) than the structure has leaves")
    return out


def _no_leaf(value) -> bool:
    return False


def flatten(value) -> list:
    """The leaves of `value`, depth first."""
    return _flatten(value, _no_leaf)


def pack_sequence_as(structure, flat):
    """`flat` (as flatten gives it) in the shape of `structure`."""
    flat = list(flat)
    if len(flat) != len(flatten(structure)):
        raise InvalidArgumentError(
            f"pack_sequence_as: the structure has {len(flatten(structure))} leaves, got "
            f"{len(flat)} values")
    return _pack(structure, flat, _no_leaf)


def map_structure(fn, *structures):
    """fn applied leaf by leaf to structures of the same shape, in that shape."""
    for s in structures[1:]:
        if not same_structure(structures[0], s):
            raise InvalidArgumentError(
                f"map_structure: the structures differ: {describe(structures[0])} and "
                f"{describe(s)}")
    flats = [flatten(s) for s in structures]
    return pack_sequence_as(structures[0], [fn(*vals) for vals in zip(*flats)])


def same_structure(a, b) -> bool:
    ka, kb = _children(a, _no_leaf), _children(b, _no_leaf)
    if ka is None or kb is None:
        return ka is None and kb is None
    if isinstance(a, dict) != isinstance(b, dict):
        return False
    if isinstance(a, dict) and sorted(a) != sorted(b):
        return False
    return len(ka) == len(kb) and all(same_structure(x, y) for x, y in zip(ka, kb))


def describe(value) -> str:
    """The structure with each leaf shown as '*', for messages."""
    kids = _children(value, _no_leaf)
    if kids is None:
        return "*"
    inner = ", ".join(describe(k) for k in kids)
    return f"{{{inner}}}" if isinstance(value, dict) else f"[{inner}]"


def flatten_shapes(value) -> list:
    return _flatten(value, _is_shape)


def pack_shapes_as(structure, flat):
    return _pack(structure, list(flat), _is_shape)


def map_shapes(fn, structure):
    if isinstance(structure, int):
        structure = [structure]
    return pack_shapes_as(structure, [fn(list(s)) for s in flatten_shapes(structure)])
