"""Scratch arrays that kernels reuse from one step to the next (im2col columns, padded copies).

A workspace is keyed by what it is for (a tag naming the kernel's use and everything that
decides its contents' layout, e.g. the paddings whose zero border it keeps), its shape and its
dtype, per thread (two ops running at once on the executor's thread pool never share one) and
per array module. It is never an output and never holds a reference to a user's array: a
kernel copies into it, reads it back and returns fresh arrays. The pool keeps at most
LIMIT_BYTES per thread, dropping the least recently used arrays beyond that.

>>> import numpy as np
>>> a = get(np, ("doc",), (2, 3), np.float32)
>>> a is get(np, ("doc",), (2, 3), np.float32)
True
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

LIMIT_BYTES = 512 << 20

_local = threading.local()


def _pool() -> OrderedDict:
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = OrderedDict()
    return pool


def get(xp, tag: tuple, shape, dtype, fill=None):
    """The workspace for (tag, shape, dtype): new (filled with `fill` if given, else
    uninitialized) the first time, else as the last user left it. `fill` is applied only when
    the array is made, so a tag whose user keeps a border at `fill` gets it back that way."""
    shape = tuple(map(int, shape))
    key = (xp.__name__, tag, shape, np.dtype(dtype))  # str(dtype) costs microseconds
    pool = _pool()
    arr = pool.get(key)
    if arr is not None:
        pool.move_to_end(key)
        return arr
    arr = xp.empty(shape, dtype=dtype) if fill is None else xp.full(shape, fill, dtype=dtype)
    pool[key] = arr
    total = sum(a.nbytes for a in pool.values())
    while total > LIMIT_BYTES and len(pool) > 1:
        _, old = pool.popitem(last=False)
        total -= old.nbytes
    return arr


def clear() -> None:
    """Drop this thread's workspaces."""
    _pool().clear()
