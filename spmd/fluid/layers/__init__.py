"""fluid.layers: the layer builders (spmd.layers.FLUID_LAYERS_NAMES); fluid 1.8's submodules
by their names (`fluid.layers.nn`, `.ops`, `.tensor`, ...: see fluid_modules) and `collective`
(`from paddle.fluid.layers import collective`). A name is imported at its first use."""
import pkgutil as _pkgutil

from ... import layers as _layers
from ... import lazy as _lazy

# spmd.layers' names, but fluid 1.8's modules (fluid.layers.nn, .io, ...) by their own names
_MODULES = {m.name for m in _pkgutil.iter_modules(__path__)}
__getattr__, __dir__ = _lazy.attach(__name__, {
    name: f"spmd.layers:{name}" for name in _layers.__all__ if name not in _MODULES
}, submodules=True)

__all__ = list(_layers.FLUID_LAYERS_NAMES)
