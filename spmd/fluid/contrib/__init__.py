"""fluid.contrib: the parts dense static fluid 1.8 programs use: `reader.
distributed_batch_reader` and `mixed_precision` (decorate, AutoMixedPrecisionLists)."""
from . import mixed_precision, reader  # noqa: F401
from .mixed_precision import decorate  # noqa: F401 - fluid.contrib.decorate, as in fluid 1.8

__all__ = ["decorate", "mixed_precision", "reader"]
