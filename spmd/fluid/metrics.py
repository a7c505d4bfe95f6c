"""fluid.metrics: the host-side metric classes (spmd.metrics), and DetectionMAP, which spmd
names but cannot build: it needs fluid's detection_map op, which spmd does not have, so
constructing one says so (rather than an AttributeError on the module).

>>> # from spmd.fluid.metrics import Accuracy, Auc
"""
from __future__ import annotations

from ..metrics import *  # noqa: F401,F403
from ..metrics import __all__ as _metrics_all

__all__ = list(_metrics_all) + ["DetectionMAP"]


class DetectionMAP:
    """fluid 1.8's detection mAP evaluator; not available in spmd (no detection_map op).

    >>> # DetectionMAP(...) raises NotImplementedError naming the alternative
    """

    def __init__(self, input, gt_label, gt_box, gt_difficult=None, class_num=None,
                 background_label=0, overlap_threshold=0.5, evaluate_difficult=True,
                 ap_version="integral"):
        raise NotImplementedError(
            "fluid.metrics.DetectionMAP: spmd has no detection_map op, so the mAP evaluator "
            "cannot be built; fetch the detections and compute mAP on the host (e.g. with "
            "pycocotools), or run this evaluation in PaddlePaddle")
