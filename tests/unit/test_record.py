"""spmd/record.py: a Record compares and prints by its fields; a FrozenRecord also hashes by
them; one made with frozen=True refuses assignment and deletion with FrozenError (an
AttributeError, as a frozen dataclass's) and is copied, deep-copied and pickled by its
fields."""
from __future__ import annotations

import copy
import pickle

import pytest

from spmd.record import FrozenError, FrozenRecord, Record


class Point(Record):
    __slots__ = ("x", "y")
    _fields = __slots__

    def __init__(self, x, y=0):
        self.x, self.y = x, y


class Key(FrozenRecord):
    __slots__ = ("a", "b")
    _fields = __slots__

    def __init__(self, a, b):
        self.a, self.b = a, b


class Sealed(FrozenRecord, frozen=True):
    __slots__ = ("a", "items")
    _fields = __slots__

    def __init__(self, a, items=None):
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "items", [] if items is None else items)


class SealedChild(Sealed):
    __slots__ = ()


def test_record_equality_repr_and_no_hash():
    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(1, 3)
    assert Point(1, 2) != (1, 2)  # another class never equals one
    assert repr(Point(1, "z")) == "Point(x=1, y='z')"
    with pytest.raises(TypeError):
        hash(Point(1, 2))
    p = Point(1)
    p.y = 5  # a Record changes
    assert p == Point(1, 5)


def test_frozen_record_hashes_by_fields():
    assert hash(Key(1, "b")) == hash(Key(1, "b"))
    assert len({Key(1, "b"), Key(1, "b"), Key(2, "b")}) == 2


@pytest.mark.parametrize("cls", [Sealed, SealedChild])
def test_frozen_true_refuses_assignment_and_deletion(cls):
    s = cls(1)
    for change in (lambda: setattr(s, "a", 2), lambda: setattr(s, "other", 2),
                   lambda: delattr(s, "a")):
        with pytest.raises(FrozenError, match="never changed") as caught:
            change()
        assert isinstance(caught.value, AttributeError)
    assert s == cls(1) and s.a == 1 and s.items == []


def test_frozen_true_mutable_default_is_new_each_time():
    assert Sealed(1).items is not Sealed(1).items


def test_frozen_true_copies_and_pickles_by_fields():
    s = Sealed(1, [[2]])
    shallow, deep = copy.copy(s), copy.deepcopy(s)
    assert shallow == s and shallow.items is s.items
    assert deep == s and deep.items is not s.items and deep.items[0] is not s.items[0]
    again = pickle.loads(pickle.dumps(s))
    assert again == s and type(again) is Sealed
    with pytest.raises(FrozenError):
        again.a = 3
