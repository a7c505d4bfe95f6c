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


class DataLoaderBase(metaclass=abc.ABCMeta):  # noqa: B024 - ABCMeta for register(), as fluid makes it
    """fluid 1.8's base of its loaders: iterable (`for data in loader()`), with `__iter__`
    and `__next__`. spmd's loaders (DataLoader.from_generator's, PyReader) are registered as
    its subclasses. As in fluid, the base itself can be made, and its `__iter__` and
    `__next__` raise NotImplementedError: a class deriving from it provides the two."""

    def __call__(self):
        return self

    def next(self):
        return self.__next__()

    def __iter__(self):
        raise NotImplementedError(
            f"{type(self).__name__}.__iter__: a DataLoaderBase subclass must define __iter__")

    def __next__(self):
        raise NotImplementedError(
            f"{type(self).__name__}.__next__: a DataLoaderBase subclass must define __next__")

    _check_input_array = GeneratorLoader._check_input_array


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
