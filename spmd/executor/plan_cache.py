"""A job's plan cache: compiled plans keyed by (program, feed names, fetch names, place).

`place` is the index of the job's place the plan runs on (0 for a one-place job); every job
has its own cache (executor/job.py). An entry is rebuilt when the program
changed (its version), its random seed changed (a new generator), or a flag was set in code
since (FLAGS_check_nan_inf); it replaces the stale one, so a program edited in a loop does not
accumulate plans. Keyed on the program's uid, not id(): an id is reused once a program is
freed.

>>> cache = PlanCache()
>>> len(cache)
0
"""
from __future__ import annotations

from collections.abc import Callable

from ..flags import revision as flags_revision


class PlanCache:
    def __init__(self):
        self._entries: dict = {}

    @staticmethod
    def key(program, feed_names, fetch_names, where):
        """What the plan of these names is cached under (a caller may keep it: `get`)."""
        return (program._uid, tuple(sorted(feed_names)), tuple(fetch_names), where)

    def get(self, program, feed_names, fetch_names, where, build: Callable, key=None):
        """The plan for this key, made with `build()` when missing or stale; `key`: this
        cache's `key(...)` of the same names, when the caller kept it."""
        if key is None:
            key = self.key(program, feed_names, fetch_names, where)
        stamp = (program._version, program.random_seed, flags_revision())
        entry = self._entries.get(key)
        if entry is None or entry[0] != stamp:
            if entry is not None:
                _close(entry[1])
            entry = self._entries[key] = (stamp, build())
        return entry[1]

    def find(self, program, feed_names, fetch_names, where=0):
        """The cached plan for this key (stale or not), or None."""
        entry = self._entries.get(self.key(program, feed_names, fetch_names, where))
        return None if entry is None else entry[1]

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every plan, stopping their threads (ExecutionStrategy.num_threads > 1)."""
        for _, plan in self._entries.values():
            _close(plan)
        self._entries.clear()


def _close(plan) -> None:
    close = getattr(plan, "close_threads", None)  # a Plan; other runners have none
    if close is not None:
        close()
