"""fluid.contrib.slim.prune: the pruners (Pruner, StructurePruner); the Compressor's prune
strategies are named in docs/fluid_coverage.md with the reason."""
from ...._pending import missing_names
from . import pruner  # noqa: F401 - fluid's submodule
from .pruner import Pruner, StructurePruner

__all__ = ["Pruner", "StructurePruner"]

missing_names(globals(), ["AutoPruneStrategy", "PruneStrategy", "SensitivePruneStrategy",
                          "UniformPruneStrategy"])
