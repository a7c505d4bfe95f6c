"""fluid.reader: DataLoader and PyReader (spmd/reader/loader.py), default_collate_fn, and
DataLoaderBase, the class every loader is an instance of (programs test `isinstance(loader,
fluid.reader.DataLoaderBase)`).

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.data("x", [None, 1], "float32")
...     loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=2)
>>> isinstance(loader, DataLoaderBase)
True
"""
from __future__ import annotations

import abc

from ..reader.collate import default_collate_fn
from ..reader.loader import DataLoader, GeneratorLoader, PyReader

__all__ = ["DataLoader", "PyReader", "default_collate_fn"]


class DataLoaderBase(abc.ABC):
    """fluid 1.8's base of its loaders: iterable (`for data in loader()`), with `__iter__`
    and `__next__`. spmd's loaders (DataLoader.from_generator's, PyReader) are registered as
    its subclasses; a class deriving from it provides the two methods."""

    def __call__(self):
        return self

    @abc.abstractmethod
    def __iter__(self):
        """The loader's iterator over batches."""

    @abc.abstractmethod
    def __next__(self):
        """The next batch."""


DataLoaderBase.register(GeneratorLoader)
DataLoaderBase.register(PyReader)

_KEEP_ORDER = [True]


def keep_data_loader_order(*args):
    """fluid's switch for whether a multi-place DataLoader feeds the places in order:
    `keep_data_loader_order()` reads it, `keep_data_loader_order(False)` sets it. spmd's loaders
    always deal batches to the places in order, so False is kept and changes nothing."""
    if not args:
        return _KEEP_ORDER[0]
    if len(args) != 1 or not isinstance(args[0], bool):
        raise TypeError(f"keep_data_loader_order takes one bool, got {args!r}")
    _KEEP_ORDER[0] = args[0]
    return None
