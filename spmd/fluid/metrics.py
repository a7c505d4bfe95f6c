"""fluid.metrics: the host-side metric classes (spmd.metrics), and DetectionMAP, which builds
fluid's detection_map ops into the program (spmd.layers.detection_map_metric).

>>> # from spmd.fluid.metrics import Accuracy, Auc, DetectionMAP
"""
from __future__ import annotations

from ..layers.detection_map_metric import DetectionMAP
from ..metrics import *  # noqa: F401,F403
from ..metrics import __all__ as _metrics_all

__all__ = list(_metrics_all) + ["DetectionMAP"]
