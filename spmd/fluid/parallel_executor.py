"""fluid.parallel_executor: ParallelExecutor."""
from ..executor.parallel_executor import ParallelExecutor  # noqa: F401
