"""fluid.compiler: CompiledProgram, BuildStrategy, ExecutionStrategy."""
from ..executor.compiled import CompiledProgram  # noqa: F401
from ..executor.strategy import BuildStrategy, ExecutionStrategy  # noqa: F401
