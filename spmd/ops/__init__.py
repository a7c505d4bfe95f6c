"""Op definitions. An op module is imported when an op it defines is first looked up in OP_DEFS
(the generated op_index.py says which module defines which op); OP_DEFS.load_all() imports them
all. Importing this package installs the op schema the IR builds operators with."""
from .. import lazy as _lazy
from ..core.operator import install_op_schema
from .build import build_operator
from .registry import OP_DEFS, REQUIRED, define_op, get_op_def, grad_var_name


def _block_attrs(type: str) -> dict:
    """{name: "block" | "blocks"} of an op type's sub-block attributes ({} for an unknown type)."""
    try:
        opdef = OP_DEFS[type]
    except KeyError:
        return {}
    return {name: spec.kind for name, spec in opdef.attrs.items()
            if spec.kind in ("block", "blocks")}


install_op_schema(build_operator,
                  lambda type, attrs: get_op_def(type).validate_attrs(attrs, f"op '{type}'"),
                  lambda type: _block_attrs(type))

__all__ = ["OP_DEFS", "REQUIRED", "define_op", "get_op_def", "grad_var_name"]

# spmd.ops.<module> reads as before: a module not imported yet is imported on access
__getattr__, __dir__ = _lazy.attach(__name__, submodules=True)
