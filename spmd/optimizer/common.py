"""Variables the optimizer side creates: temporaries in the main program and persistable state
initialized by fill_constant in the startup program.

Every name comes from spmd.core.unique_name with a key derived from the parameter's name, so
every process that builds the same script under the same name space gets the same names.
"""
from __future__ import annotations

from ..core import unique_name
from ..core.program import Block, Program
from ..core.variable import Variable


def tmp_var(block: Block, key: str, shape, dtype) -> Variable:
    """A fresh non-persistable variable named `key_N`."""
    return block.create_var(name=unique_name.generate(key), shape=shape, dtype=dtype,
                            stop_gradient=True)


def persistable_var(main: Program, startup: Program, name: str, shape, dtype,
                    value: float) -> Variable:
    """A persistable variable of the main program's global block, set to `value` by a
    fill_constant op appended to `startup` (which declares the same variable)."""
    shape = list(shape)
    var = main.global_block().create_var(name=name, shape=shape, dtype=dtype, persistable=True,
                                         stop_gradient=True)
    sblock = startup.global_block()
    sblock.create_var(name=name, shape=shape, dtype=dtype, persistable=True, stop_gradient=True)
    sblock.append_op("fill_constant", outputs={"Out": [name]},
                     attrs={"shape": shape, "value": float(value), "dtype": var.dtype})
    return var


