"""Unique variable names per prefix (`fc_0.w_0`), with a guard that starts a fresh name space.

>>> with guard():
...     generate("fc")
'fc_0'
"""
from __future__ import annotations

import contextlib
import itertools
from collections import defaultdict


class UniqueNameGenerator:
    def __init__(self, prefix: str = ""):
        self.prefix = prefix
        self._counters: dict[str, itertools.count] = defaultdict(itertools.count)

    def __call__(self, key: str) -> str:
        return f"{self.prefix}{key}_{next(self._counters[key])}"


_generator = UniqueNameGenerator()


def generate(key: str) -> str:
    """Next unique name for `key`: key_0, key_1, ..."""
    return _generator(key)


def switch(new_generator: UniqueNameGenerator | None = None) -> UniqueNameGenerator:
    """Install `new_generator` (a fresh one if None) and return the previous one."""
    global _generator
    old, _generator = _generator, new_generator or UniqueNameGenerator()
    return old


@contextlib.contextmanager
def guard(new_generator: UniqueNameGenerator | str | None = None):
    """Run a block with its own name space, so two identical builds get identical names."""
    if isinstance(new_generator, str):
        new_generator = UniqueNameGenerator(new_generator)
    old = switch(new_generator)
    try:
        yield
    finally:
        switch(old)
