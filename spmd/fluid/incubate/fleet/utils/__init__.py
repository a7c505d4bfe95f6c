"""fluid.incubate.fleet.utils: `fs`, the file systems fleet's checkpoints are written to."""
from . import fs

__all__ = ["fs"]
