"""Program -> Program rewrites, one per file; each pass registers itself with the BuildStrategy
fields it serves and its order (registry.py), and the data-parallel rewrite runs the ones whose
condition holds (data_parallel.py)."""
from .strategy import BuildStrategy, ExecutionStrategy, GradientScaleStrategy, ReduceStrategy

__all__ = ["BuildStrategy", "ExecutionStrategy", "GradientScaleStrategy", "ReduceStrategy"]
