"""fluid.io: save/load of variables, persistables and inference models (no pickle)."""
from ..io import *  # noqa: F401,F403
