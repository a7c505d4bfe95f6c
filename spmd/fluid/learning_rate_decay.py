"""fluid.learning_rate_decay: fluid 1.8's alias module of the learning-rate schedules."""
from ..layers.learning_rate_scheduler import *  # noqa: F401,F403
from ..layers.learning_rate_scheduler import __all__  # noqa: F401
