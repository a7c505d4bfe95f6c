"""fluid.io: save/load of variables, persistables and inference models (no pickle), and the
feeding names fluid.io also holds (DataLoader, PyReader, batch, shuffle, default_collate_fn)."""
from ..io import *  # noqa: F401,F403
from ..reader.batch import batch  # noqa: F401
from ..reader.collate import default_collate_fn  # noqa: F401
from ..reader.decorator import (  # noqa: F401 - fluid.io holds the reader decorators too
    ComposeNotAligned,
    buffered,
    cache,
    chain,
    compose,
    firstn,
    map_readers,
    shuffle,
    xmap_readers,
)
from ..reader.loader import DataLoader, PyReader  # noqa: F401
from ..reader.multiprocess import multiprocess_reader  # noqa: F401
