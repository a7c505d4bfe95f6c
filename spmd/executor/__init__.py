"""Execution: the compiled plan, Executor, CompiledProgram, ParallelExecutor."""
from .executor import Executor

__all__ = ["Executor"]
