"""fluid.contrib.slim.quantization.mkldnn_post_training_strategy: fluid 1.8's model compression
framework (slim: Compressor and its config-driven pruning, distillation, quantization and
light-NAS strategies). spmd does not provide its names; docs/fluid_coverage.md says why for
each.
"""
from ...._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "MKLDNNPostTrainingQuantStrategy"])
