"""fluid.contrib.layers.metric_op: ctr_metric_bundle."""
from ..._pending import missing_names

__all__: list[str] = []

MISSING = ["ctr_metric_bundle"]
missing_names(globals(), MISSING)
