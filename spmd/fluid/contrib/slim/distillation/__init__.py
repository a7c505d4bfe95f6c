"""fluid.contrib.slim.distillation: the distillers (distiller) and DistillationStrategy
(distillation_strategy)."""
from . import distillation_strategy, distiller  # noqa: F401 - fluid's submodules
from .distillation_strategy import DistillationStrategy
from .distiller import FSPDistiller, L2Distiller, SoftLabelDistiller

__all__ = ["FSPDistiller", "L2Distiller", "SoftLabelDistiller", "DistillationStrategy"]
