"""What a reader's worker thread hands its consumer through a queue besides items: the end
marker and a carried exception. One definition for the decorators (decorator.py) and the
loaders' read-ahead thread (prefetch.py), so an item is never mistaken for either."""
from __future__ import annotations

__all__: list[str] = []


class _EndOfData:
    """The type of END: a named singleton, so it prints as what it is in a traceback."""

    def __repr__(self) -> str:
        return "END"


END = _EndOfData()  # the source has no more items


class Failure:
    """The worker's exception, carried through a queue: the consumer re-raises it with the
    worker's traceback (in error.__traceback__), so it fails where the items are used."""

    def __init__(self, error: BaseException):
        self.error = error


def reraise(item):
    """Raise the carried exception when `item` is a Failure; otherwise do nothing."""
    if isinstance(item, Failure):
        raise item.error
