"""paddle.reader and fluid's feeding: the reader decorators, paddle.batch, DataFeeder,
DataLoader.from_generator, PyReader and the py_reader variables.

>>> import spmd as paddle
>>> def samples():
...     yield from range(5)
>>> list(paddle.batch(paddle.reader.shuffle(samples, 1), 2)())
[[0, 1], [2, 3], [4]]
"""
from __future__ import annotations

from .batch import batch
from .decorator import *  # noqa: F403
from .decorator import __all__ as _decorator_names
from .multiprocess import multiprocess_reader

__all__ = [*_decorator_names, "multiprocess_reader", "batch"]
