"""Handles: what an async collective returns (spmd/comm/base.py's contract).

>>> DoneHandle(3).wait()
3
"""
from __future__ import annotations

import abc


class Handle(abc.ABC):
    """A collective issued on a progress engine.

    `out` is where the result lands: the array an in-place collective works on, the `out=`
    array given, a bucket's views. A kernel may hand it on at once; it holds the result once
    the handle (or `wait_all`) has been waited for."""

    out = None

    @abc.abstractmethod
    def wait(self):
        """Block until the collective completed (at most the collective timeout) and return
        its result array."""

    @abc.abstractmethod
    def test(self) -> bool:
        """Whether the collective completed (its failure, if any, is raised by `wait`)."""


class DoneHandle(Handle):
    """A collective that already completed."""

    def __init__(self, result):
        self.out = result

    def wait(self):
        return self.out

    def test(self) -> bool:
        return True


class ThenHandle(Handle):
    """`handle`, whose `wait()` returns `result` instead (a bucket's per-array views)."""

    def __init__(self, handle: Handle, result):
        self._handle, self.out = handle, result

    def wait(self):
        self._handle.wait()
        return self.out

    def test(self) -> bool:
        return self._handle.test()
