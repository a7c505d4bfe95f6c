"""fluid.metrics: the host-side metric classes (spmd.metrics). DetectionMAP is not provided:
it needs fluid's detection_map op, which spmd does not have.

>>> # from spmd.fluid.metrics import Accuracy, Auc
"""
from __future__ import annotations

from ..metrics import *  # noqa: F401,F403
from ..metrics import __all__  # noqa: F401
