"""fluid.transpiler.details: the transpiler's helpers (checkport, program_utils, ufind,
vars_distributed)."""
from . import checkport, program_utils, ufind, vars_distributed
from .checkport import *  # noqa: F403
from .program_utils import *  # noqa: F403
from .ufind import *  # noqa: F403
from .vars_distributed import *  # noqa: F403

__all__ = [*checkport.__all__, *program_utils.__all__, *ufind.__all__,
           *vars_distributed.__all__]
