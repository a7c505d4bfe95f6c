"""fluid.dygraph: importable, so static programs that import it (or name its classes) run.
spmd runs static programs: entering dygraph mode (guard, enable_dygraph, to_variable,
DataParallel, prepare_context, the layer classes that need eager tensors, ...) raises
PreconditionError saying how to write the model statically (Linear -> fluid.layers.fc inside
program_guard, ...). `Layer` and its subclasses Embedding, LayerNorm, RowConv and SequenceConv
build static programs, as fluid 1.8's do with dygraph mode off.

>>> import spmd.fluid as fluid
>>> fluid.dygraph.enabled()
False
"""
from . import (
    backward_strategy,
    base,
    checkpoint,
    container,
    jit,
    layers,
    learning_rate_scheduler,
    nn,
    parallel,
)
from .backward_strategy import *  # noqa: F403
from .base import *  # noqa: F403
from .checkpoint import *  # noqa: F403
from .container import *  # noqa: F403
from .jit import *  # noqa: F403
from .layers import *  # noqa: F403
from .learning_rate_scheduler import *  # noqa: F403
from .nn import *  # noqa: F403
from .parallel import *  # noqa: F403

__all__ = [
    "backward_strategy", "base", "checkpoint", "container", "jit", "layers",
    "learning_rate_scheduler", "nn", "parallel",
    *backward_strategy.__all__, *base.__all__, *checkpoint.__all__, *container.__all__,
    *jit.__all__, *layers.__all__, *learning_rate_scheduler.__all__, *nn.__all__,
    *parallel.__all__,
]
