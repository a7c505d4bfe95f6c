"""Op definitions. Importing this package registers every op in OP_DEFS."""
from . import math, nn, optim, tensor  # noqa: F401 - registration side effects
from .registry import OP_DEFS, REQUIRED, define_op, get_op_def, grad_var_name

__all__ = ["OP_DEFS", "REQUIRED", "define_op", "get_op_def", "grad_var_name"]
