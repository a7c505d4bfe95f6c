"""fluid.layers.learning_rate_scheduler: fluid 1.8's module of that name (see fluid_modules),
with its step counter helper `_decay_step_counter`, which model-zoo schedules call."""
from ...layers.learning_rate_scheduler import _decay_step_counter
from .fluid_modules import populate

__all__ = populate(globals(), "learning_rate_scheduler",
                   {"_decay_step_counter": _decay_step_counter})
