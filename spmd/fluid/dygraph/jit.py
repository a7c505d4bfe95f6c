"""fluid.dygraph.jit: `declarative` calls the function as it is (as fluid 1.8 does outside
dygraph mode); ProgramTranslator can be switched on and off; TracedLayer.trace and the
translator's program getters need dygraph and raise.

>>> from spmd.fluid.dygraph.jit import declarative
>>> declarative(lambda x: x + 1)(1)
2
"""
from __future__ import annotations

import functools

from ._static_only import static_only

__all__ = ["TracedLayer", "declarative", "dygraph_to_static_func", "ProgramTranslator"]


def declarative(dygraph_func):
    """Outside dygraph mode (always, in spmd) the decorated function runs as written: in a
    static program its fluid.layers calls add ops."""

    @functools.wraps(dygraph_func)
    def wrapper(*args, **kwargs):
        return dygraph_func(*args, **kwargs)

    return wrapper


dygraph_to_static_func = declarative


class ProgramTranslator:
    """fluid's dygraph-to-static translator (a singleton). `enable()` is accepted; getting a
    translated program needs dygraph code and raises."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance.enable_declarative = True
        return cls._instance

    def enable(self, enable_declarative: bool):
        """Switch translation on or off: recorded; `declarative` functions run as written."""
        self.enable_declarative = bool(enable_declarative)

    def _refuse(self, *args, **kwargs):
        """get_output / get_func / get_program / get_code: translating dygraph code."""
        raise static_only("ProgramTranslator's program translation",
                          "writing the function with fluid.layers inside program_guard")

    get_output = get_func = get_program = get_code = _refuse


class TracedLayer:
    """fluid.dygraph.TracedLayer: `trace` records a dygraph Layer and raises here."""

    def __init__(self, *args, **kwargs):
        raise static_only("fluid.dygraph.TracedLayer", "fluid.io.save_inference_model")

    @staticmethod
    def trace(layer, inputs):
        raise static_only("fluid.dygraph.TracedLayer.trace()",
                          "fluid.io.save_inference_model(dirname, feeds, targets, exe)")
