"""paddle.batch / fluid.io.batch: group a sample reader's items into lists of batch_size."""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError

__all__ = ["batch"]


def batch(reader, batch_size, drop_last=False):
    """A reader creator yielding lists of `batch_size` consecutive samples of `reader`; the last,
    shorter list is yielded unless `drop_last`.

    >>> def samples():
    ...     yield from range(5)
    >>> list(batch(samples, 2)())
    [[0, 1], [2, 3], [4]]
    >>> list(batch(samples, 2, drop_last=True)())
    [[0, 1], [2, 3]]
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (numbers.Real, str)):
        raise InvalidArgumentError(
            f"paddle.batch: batch_size must be a positive int, got {batch_size!r}")
    size = int(batch_size)
    if size <= 0:
        raise InvalidArgumentError(
            f"paddle.batch: batch_size should be a positive integer, got batch_size={size}")
    if not callable(reader):
        raise InvalidArgumentError(
            f"paddle.batch: reader must be a reader creator (a function returning an iterable "
            f"of samples), got {type(reader).__name__}; pass the function, not its call")

    def batch_reader():
        items = []
        for sample in reader():
            items.append(sample)
            if len(items) == size:
                yield items
                items = []
        # fluid keeps it only when drop_last == False, so drop_last=None drops it too
        if items and drop_last == 0:
            yield items

    return batch_reader
