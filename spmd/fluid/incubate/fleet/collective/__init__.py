"""fluid.incubate.fleet.collective: `fleet`, `DistributedStrategy` and `TrainStatus` of fluid
1.6-1.8's collective mode, trained on spmd's data-parallel engine; fleet.save_check_point /
load_check_point write fluid's checkpoint layout atomically (spmd/fleet/checkpoint.py).

>>> from spmd.fluid.incubate.fleet.collective import fleet, DistributedStrategy
"""
from .....fleet.base import WrappedOptimizer
from .....fleet.collective import (  # noqa: F401
    Collective,
    CollectiveOptimizer,
    DistributedStrategy,
    TrainStatus,
    fleet,
)
from .....fleet.fs import LocalFS  # noqa: F401 - fluid's module imports it too

__all__ = ["Collective", "CollectiveOpBasedOptimizer", "CollectiveOptimizer", "DistFCConfig",
           "DistributedStrategy", "LambConfig", "TrainStatus", "fleet"]


class LambConfig:
    """fluid 1.8's placeholder for LAMB settings of collective mode (it has no fields)."""


class DistFCConfig:
    """fluid 1.8's placeholder for distributed-FC settings of collective mode (no fields)."""


class CollectiveOpBasedOptimizer(WrappedOptimizer):
    """The base of collective-mode optimizers built from communication ops: `optimizer`'s
    backward and apply_gradients as they are, with a DistributedStrategy.

    >>> # class MyOptimizer(CollectiveOpBasedOptimizer): def minimize(self, loss, ...): ...
    """

    def __init__(self, optimizer, strategy=None):
        if not isinstance(strategy, DistributedStrategy):
            raise TypeError(f"strategy must be DistributedStrategy, got "
                            f"{type(strategy).__name__}")
        self._optimizer, self._strategy = optimizer, strategy
