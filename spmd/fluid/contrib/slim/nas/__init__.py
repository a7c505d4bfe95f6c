"""fluid.contrib.slim.nas: SearchSpace (search_space) and the file lock (lock); the light-NAS
strategy, its search agent and controller server are named in docs/fluid_coverage.md."""
from ...._pending import missing_names
from . import lock, search_space  # noqa: F401 - fluid's submodules
from .search_space import SearchSpace

__all__ = ["SearchSpace"]

missing_names(globals(), ["ControllerServer", "LightNASStrategy", "SearchAgent"])
