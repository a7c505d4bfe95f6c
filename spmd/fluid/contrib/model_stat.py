"""fluid.contrib.model_stat: fluid 1.8's summary(program) of parameters and FLOPs per layer.
docs/fluid_coverage.md says what spmd provides.
"""
from .._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "summary"])
