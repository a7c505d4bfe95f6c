"""fluid.contrib.quantize.quantize_transpiler: fluid 1.8's QuantizeTranspiler (fake-quantization
training rewrite). spmd does not provide it; docs/fluid_coverage.md says why.
"""
from ..._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "QuantizeTranspiler"])
