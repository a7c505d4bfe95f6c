"""fluid.contrib.slim.nas: light NAS: LightNASStrategy (light_nas_strategy), ControllerServer
(controller_server), SearchAgent (search_agent), SearchSpace (search_space) and the file lock
(lock)."""
from . import controller_server, light_nas_strategy, lock, search_agent, search_space  # noqa: F401
from .controller_server import ControllerServer
from .light_nas_strategy import LightNASStrategy
from .search_agent import SearchAgent
from .search_space import SearchSpace

__all__ = ["LightNASStrategy", "ControllerServer", "SearchAgent", "SearchSpace"]
