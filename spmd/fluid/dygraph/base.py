"""fluid.dygraph.base: mode switches and helpers. In spmd the program is always static:
`enabled()` is False, `disable_dygraph()` and `no_grad` are harmless, and entering dygraph
mode raises a clear error.

>>> from spmd.fluid.dygraph import base
>>> base.enabled()
False
"""
from __future__ import annotations

import contextlib
import functools

from ._static_only import static_only

__all__ = ["no_grad", "grad", "guard", "enable_dygraph", "disable_dygraph",
           "enable_imperative", "disable_imperative", "enabled", "to_variable"]


def enabled() -> bool:
    """Whether dygraph mode is on: never, in spmd."""
    return False


def enable_dygraph(place=None):
    """Refused: spmd runs static programs."""
    raise static_only("fluid.enable_dygraph()", "not calling it (static mode is the default)")


def disable_dygraph():
    """Back to static mode: spmd is always there, so nothing to do."""


enable_imperative = enable_dygraph
disable_imperative = disable_dygraph


@contextlib.contextmanager
def guard(place=None):
    """Refused on entry: `with fluid.dygraph.guard():` runs dygraph code."""
    raise static_only("fluid.dygraph.guard()",
                      "`with fluid.program_guard(main, startup):` plus exe.run")
    yield  # pragma: no cover - a generator, so that the error is raised on entry


def to_variable(value, name=None, zero_copy=None):
    """Refused: a dygraph tensor. Declare a fluid.data input and feed the array instead."""
    raise static_only("fluid.dygraph.to_variable()",
                      "x = fluid.data(name, shape, dtype) and exe.run(feed={name: array})")


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=False, no_grad_vars=None, backward_strategy=None):
    """Refused: dygraph autograd. fluid.gradients(targets, inputs) is the static one."""
    raise static_only("fluid.dygraph.grad()", "fluid.gradients(targets, inputs)")


class _NoGrad:
    """`no_grad` as fluid 1.8 has it in static mode: a decorator that calls the function as it
    is, and a context manager that does nothing (static programs choose their gradients with
    stop_gradient / no_grad_set)."""

    def __call__(self, func=None):
        if func is None:
            return self
        if not callable(func):
            raise TypeError(f"no_grad decorates a function, got {type(func).__name__}")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            return func(*args, **kwargs)

        return wrapper

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


no_grad = _NoGrad()
