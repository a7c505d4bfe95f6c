"""fluid.optimizer: fluid 1.8's optimizer names and arguments."""
from ..optimizer.fluid_names import (  # noqa: F401
    SGD,
    Adam,
    AdamOptimizer,
    Momentum,
    MomentumOptimizer,
    Optimizer,
    SGDOptimizer,
)
