"""fluid.contrib.slim: fluid 1.8's model compression framework: the Compressor running
config-driven strategies (pruning, distillation, light NAS) over GraphWrappers. Its
quantization names are listed in docs/fluid_coverage.md with the reason spmd lacks them."""
from . import core, distillation, graph, nas, prune, quantization, searcher  # noqa: F401
from .core import Compressor, ConfigFactory, Context, Strategy  # noqa: F401 - as fluid's *

__all__ = ["Compressor"]
