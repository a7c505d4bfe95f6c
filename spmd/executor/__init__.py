"""Execution: the compiled plan, Executor, CompiledProgram, ParallelExecutor."""
from .compiled import CompiledProgram
from .executor import Executor
from .parallel_executor import ParallelExecutor

__all__ = ["CompiledProgram", "Executor", "ParallelExecutor"]
