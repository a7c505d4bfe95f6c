"""fluid.compiler: CompiledProgram, BuildStrategy, ExecutionStrategy."""
from ..executor.compiled import CompiledProgram  # noqa: F401
from ..passes.strategy import BuildStrategy, ExecutionStrategy  # noqa: F401
