"""fluid.contrib.slim.prune: the pruners (pruner), the filter-pruning strategies
(prune_strategy) and the searched one (auto_prune_strategy)."""
from . import auto_prune_strategy, prune_strategy, pruner  # noqa: F401 - fluid's submodules
from .auto_prune_strategy import AutoPruneStrategy
from .prune_strategy import PruneStrategy, SensitivePruneStrategy, UniformPruneStrategy
from .pruner import Pruner, StructurePruner

__all__ = ["Pruner", "StructurePruner", "SensitivePruneStrategy", "UniformPruneStrategy",
           "PruneStrategy", "AutoPruneStrategy"]
