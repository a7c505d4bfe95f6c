"""Program -> Program rewrites, one per file; BuildStrategy only picks and orders them
(data_parallel.py)."""
from .strategy import BuildStrategy, ExecutionStrategy, GradientScaleStrategy, ReduceStrategy

__all__ = ["BuildStrategy", "ExecutionStrategy", "GradientScaleStrategy", "ReduceStrategy"]
