"""fluid.io: save/load of variables, persistables and inference models (no pickle), and the
feeding names fluid.io also holds (DataLoader, PyReader, batch, shuffle)."""
from ..io import *  # noqa: F401,F403
from ..reader.batch import batch  # noqa: F401
from ..reader.decorator import shuffle  # noqa: F401
from ..reader.loader import DataLoader, PyReader  # noqa: F401
