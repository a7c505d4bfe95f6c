"""fluid.executor: Executor, global_scope, scope_guard."""
from ..core import Scope, global_scope, scope_guard  # noqa: F401
from ..executor import Executor  # noqa: F401
