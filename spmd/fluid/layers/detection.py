"""fluid.layers.detection: fluid 1.8's module of that name (see fluid_modules); it also holds
detection_map, which fluid 1.8 keeps out of fluid.layers (fluid.metrics.DetectionMAP uses it)."""
from ...layers.detection_ssd import detection_map
from .fluid_modules import populate

__all__ = populate(globals(), "detection", extra={"detection_map": detection_map})
