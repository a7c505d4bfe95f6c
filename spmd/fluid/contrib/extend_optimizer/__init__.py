"""fluid.contrib.extend_optimizer: extend_with_decoupled_weight_decay."""
from . import extend_optimizer_with_weight_decay
from .extend_optimizer_with_weight_decay import extend_with_decoupled_weight_decay

__all__ = ["extend_optimizer_with_weight_decay", "extend_with_decoupled_weight_decay"]
