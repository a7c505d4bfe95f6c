"""fluid.contrib.mixed_precision: decorate(optimizer, ...) and AutoMixedPrecisionLists, in
fluid 1.8's modules (decorator, fp16_lists, fp16_utils). See decorator.py for what spmd does
with them (it trains in the program's own dtype)."""
from . import decorator, fp16_lists, fp16_utils
from .decorator import decorate
from .fp16_lists import AutoMixedPrecisionLists

__all__ = ["AutoMixedPrecisionLists", "decorate", "decorator", "fp16_lists", "fp16_utils"]
