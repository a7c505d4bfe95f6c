"""fluid.contrib.mixed_precision.fp16_lists: AutoMixedPrecisionLists."""
from .decorator import AutoMixedPrecisionLists

__all__ = ["AutoMixedPrecisionLists"]
