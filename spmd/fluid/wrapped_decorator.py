"""fluid.wrapped_decorator: decorators that keep the wrapped function's name, docstring and
signature (model-zoo utilities import `signature_safe_contextmanager` from here).

>>> @signature_safe_contextmanager
... def guard(tag: str):
...     yield tag
>>> with guard("x") as t:
...     t
'x'
>>> guard.__name__
'guard'
"""
from __future__ import annotations

import contextlib
import functools

__all__ = ["signature_safe_contextmanager", "wrap_decorator"]


def wrap_decorator(decorator_func):
    """`decorator_func` made to return functions that look like the ones they wrap."""
    def make(func):
        return functools.wraps(func)(decorator_func(func))
    return make


signature_safe_contextmanager = wrap_decorator(contextlib.contextmanager)
