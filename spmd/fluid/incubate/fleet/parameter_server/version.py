"""fluid.incubate.fleet.parameter_server.version: is_transpiler(), whether fleet's parameter
server is the transpiler one (in spmd always: spmd has no pslib build).

>>> is_transpiler()
True
"""
from ..base.mode import Mode

__all__ = ["BUILD_MODE", "is_transpiler"]

BUILD_MODE = Mode.TRANSPILER


def is_transpiler() -> bool:
    return BUILD_MODE == Mode.TRANSPILER
