"""spmd: fluid-style static programs, trained data-parallel with one process per place.

`import spmd as paddle` and `import spmd.fluid as fluid` both work.
"""
from . import kernels, ops  # noqa: F401 - fill the op and kernel tables
from .core import *  # noqa: F401,F403
from .executor import Executor
