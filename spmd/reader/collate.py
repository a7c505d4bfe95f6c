"""fluid.io.default_collate_fn: a list of samples -> one stacked array per field, the batch
form DataLoader's batch generators yield."""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["default_collate_fn"]


def default_collate_fn(batch):
    """Stack a list of samples into a list of arrays, one per field, batch dimension first.
    A sample is an ndarray (one field) or a sequence of fields (arrays or numbers).

    >>> out = default_collate_fn([(np.array([1., 2.]), 3), (np.array([4., 5.]), 6)])
    >>> [a.shape for a in out], out[1].tolist()
    ([(2, 2), (2,)], [3, 6])
    >>> default_collate_fn([np.array([1, 2]), np.array([3, 4])])[0].shape
    (2, 2)
    """
    batch = list(batch)
    if not batch:
        raise InvalidArgumentError(
            "default_collate_fn: the batch is empty; give it a list of at least one sample")
    if isinstance(batch[0], np.ndarray):  # a one-field sample, as fluid checks it
        return [_stack(batch, 0)]
    fields = None
    for i, sample in enumerate(batch):
        try:
            values = list(sample)
        except TypeError:
            raise InvalidArgumentError(
                f"default_collate_fn: sample {i} is of type {type(sample).__name__}, not a "
                f"sequence of fields; give each sample as a tuple (or list) of fields, or as one "
                f"ndarray") from None
        if fields is None:
            fields = [[] for _ in values]
        # fluid pairs fields up by position regardless; a sample with another number of
        # fields would shift them silently, so it is refused here
        if len(values) != len(fields):
            raise InvalidArgumentError(
                f"default_collate_fn: sample {i} has {len(values)} field(s), sample 0 has "
                f"{len(fields)}; every sample must have the same fields")
        for column, value in zip(fields, values):
            column.append(value)
    return [_stack(column, f) for f, column in enumerate(fields)]


def _stack(column: list, field: int) -> np.ndarray:
    try:
        return np.stack(column, axis=0)
    except ValueError:
        shapes = [list(np.shape(v)) for v in column]
        first = next(i for i, s in enumerate(shapes) if s != shapes[0])
        raise InvalidArgumentError(
            f"default_collate_fn: field {field}: sample {first} has shape {shapes[first]}, "
            f"sample 0 has {shapes[0]}; every sample must give a field the same shape (pad "
            f"them, or collate them with your own collate_fn)") from None
