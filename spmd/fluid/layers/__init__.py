"""fluid.layers: the layer builders (spmd.layers.FLUID_LAYERS_NAMES); fluid 1.8's submodules
by their names (`fluid.layers.nn`, `.ops`, `.tensor`, ...: see fluid_modules) and `collective`
(`from paddle.fluid.layers import collective`). A name is imported at its first use."""
import os as _os

from ... import layers as _layers
from ... import lazy as _lazy
from .. import _keep_functions

# spmd.layers' names, but fluid 1.8's modules (fluid.layers.nn, .io, ...) by their own names
# (the folder's .py files: pkgutil.iter_modules would import inspect into every start-up)
_MODULES = {f[:-3] for path in __path__ for f in _os.listdir(path)
            if f.endswith(".py") and f != "__init__.py"}
# fluid 1.8's distributions (fluid.layers.Normal is the distribution there, not the
# initializer of the same name)
_DISTRIBUTIONS = ("Categorical", "MultivariateNormalDiag", "Normal", "Uniform")
__getattr__, __dir__ = _lazy.attach(__name__, {
    **{name: f"spmd.layers:{name}" for name in _layers.__all__ if name not in _MODULES},
    **{name: f".distributions:{name}" for name in _DISTRIBUTIONS},
}, submodules=True)

__all__ = list(dict.fromkeys([*_layers.FLUID_LAYERS_NAMES, *_DISTRIBUTIONS]))




def _rnn_function():
    return _layers.rnn


# the attribute fluid.layers.rnn is the rnn function, the module fluid.layers.rnn (rnn.py) is
# fluid's module of that name, as in fluid 1.8
_keep_functions(__name__, {"rnn": _rnn_function})
