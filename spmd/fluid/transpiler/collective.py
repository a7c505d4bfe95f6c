"""fluid.transpiler.collective: fluid 1.8's collective transpilers (GradAllReduce, LocalSGD),
which insert c_* communication ops for fleet's collective mode; spmd's data parallelism
compiles the all-reduce itself (CompiledProgram.with_data_parallel / fleet.collective).
docs/fluid_coverage.md lists them with the reason."""
from .._pending import missing_names

__all__: list[str] = []

missing_names(globals(), ["GradAllReduce", "LocalSGD"])
