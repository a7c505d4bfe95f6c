"""fluid.transpiler.details.ufind: UnionFind, a disjoint-set forest over given elements.

>>> u = UnionFind(["a", "b", "c"])
>>> u.union("a", "b"); u.is_connected("a", "b"), u.is_connected("a", "c"), u.find("z")
(True, False, -1)
"""
from __future__ import annotations

__all__ = ["UnionFind"]


class UnionFind:
    """find (the root index, -1 for an unknown element), union and is_connected."""

    def __init__(self, elementes=None):
        self._parents: list[int] = []
        self._index: dict = {}
        for element in elementes or []:
            self._index[element] = len(self._parents)
            self._parents.append(len(self._parents))

    def find(self, x) -> int:
        if x not in self._index:
            return -1
        idx = self._index[x]
        while idx != self._parents[idx]:  # halve the path on the way up
            self._parents[idx] = self._parents[self._parents[idx]]
            idx = self._parents[idx]
        return idx

    def union(self, x, y) -> None:
        rx, ry = self.find(x), self.find(y)
        if rx != ry:
            self._parents[rx] = ry

    def is_connected(self, x, y) -> bool:
        return self.find(x) == self.find(y)
