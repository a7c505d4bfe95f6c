"""fluid.incubate: fleet's collective mode (`fluid.incubate.fleet.collective`)."""
from . import fleet

__all__ = ["fleet"]
