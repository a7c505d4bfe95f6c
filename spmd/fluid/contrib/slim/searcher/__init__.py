"""fluid.contrib.slim.searcher: EvolutionaryController and SAController (controller)."""
from . import controller  # noqa: F401 - fluid's submodule
from .controller import EvolutionaryController, SAController

__all__ = ["EvolutionaryController", "SAController"]
