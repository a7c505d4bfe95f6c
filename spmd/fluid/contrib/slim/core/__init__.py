"""fluid.contrib.slim.core: Compressor and Context (compressor), ConfigFactory (config) and
Strategy (strategy)."""
from . import compressor, config, strategy  # noqa: F401 - fluid's submodules
from .compressor import Compressor, Context
from .config import ConfigFactory
from .strategy import Strategy

__all__ = ["ConfigFactory", "Context", "Compressor", "Strategy"]
