"""fluid.layers.device: get_places, deprecated in fluid 1.8 (its __all__ is empty): a
PLACE_LIST variable standing for `device_count` places of `device_type`. spmd runs a program
on the places the executor or CompiledProgram is given, so nothing reads it.

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     places = get_places(device_count=2)
>>> places.type == fluid.core.VarDesc.VarType.PLACE_LIST
True
"""
from __future__ import annotations

from ...core import unique_name
from ...core.program import default_main_program
from ...errors import InvalidArgumentError

__all__: list[str] = []


def get_places(device_count=None, device_type=None):
    """A PLACE_LIST variable (fluid's deprecated get_places layer)."""
    if device_type not in (None, "CPU", "CUDA", "AUTO"):
        raise InvalidArgumentError(f"get_places: device_type must be 'CPU', 'CUDA' or 'AUTO', "
                                   f"got {device_type!r}")
    if device_count is not None and int(device_count) < 0:
        raise InvalidArgumentError(f"get_places: device_count must be >= 0, got {device_count}")
    block = default_main_program().current_block()
    return block.create_var(name=unique_name.generate("get_places.out"), type="PLACE_LIST",
                            dtype="float32", shape=[max(int(device_count or 0), 0)])
