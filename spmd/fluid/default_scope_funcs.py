"""fluid.default_scope_funcs: a per-thread stack of scopes (get_cur_scope, enter_local_scope,
leave_local_scope, var, find_var, scoped_function).

>>> import numpy as np
>>> enter_local_scope()
>>> var("x").get_tensor().set(np.ones(2, "float32"))
>>> find_var("x") is not None
True
>>> leave_local_scope()
"""
from __future__ import annotations

import threading

from ..core import Scope

__all__ = ["enter_local_scope", "find_var", "get_cur_scope", "leave_local_scope",
           "scoped_function", "var"]

_local = threading.local()


def _stack() -> list:
    if not getattr(_local, "scopes", None):
        _local.scopes = [Scope()]
    return _local.scopes


def get_cur_scope() -> Scope:
    """The innermost scope of this thread (a new root scope the first time)."""
    return _stack()[-1]


def enter_local_scope() -> None:
    """Push a kid of the current scope."""
    _stack().append(get_cur_scope().new_scope())


def leave_local_scope() -> None:
    """Pop the current scope; its parent drops its kids."""
    _stack().pop()
    get_cur_scope().drop_kids()


def var(name: str):
    """The variable `name` of the current scope (created if absent)."""
    return get_cur_scope().var(name)


def find_var(name: str):
    """The variable `name` of the current scope or its ancestors, or None."""
    return get_cur_scope().find_var(name)


def scoped_function(func) -> None:
    """Call `func()` inside a new local scope."""
    enter_local_scope()
    try:
        func()
    finally:
        leave_local_scope()
