"""fluid.layers.math_op_patch: the Python operators on Variable (already installed)."""
from ...layers.math_op_patch import monkey_patch_variable  # noqa: F401

__all__: list[str] = []
