"""fluid.contrib, as fluid 1.8 lays it out: layers (basic_lstm, basic_gru, ...), reader
(distributed_batch_reader), mixed_precision (decorate), extend_optimizer, decoder,
memory_usage_calc, model_stat, op_frequence, quantize, slim and utils. A name of fluid's that
spmd lacks says so (docs/fluid_coverage.md gives each reason)."""
from .._pending import missing_names
from . import (
    decoder,
    extend_optimizer,
    layers,
    memory_usage_calc,
    mixed_precision,
    op_frequence,
    quantize,
    reader,
    utils,
)
from .decoder import *  # noqa: F403
from .extend_optimizer import *  # noqa: F403
from .layers import *  # noqa: F403
from .memory_usage_calc import *  # noqa: F403
from .mixed_precision import decorate  # noqa: F401 - fluid.contrib.decorate, as in fluid 1.8
from .op_frequence import *  # noqa: F403
from .quantize import *  # noqa: F403
from .reader import *  # noqa: F403
from .utils import *  # noqa: F403

__all__ = ["decorate", "mixed_precision",
           *decoder.__all__, *extend_optimizer.__all__, *layers.__all__,
           *memory_usage_calc.__all__, *op_frequence.__all__, *quantize.__all__,
           *reader.__all__, *utils.__all__]

# fluid.contrib's names spmd lacks (each module says so too; docs/fluid_coverage.md says why)
missing_names(globals(), [
    *layers.nn.MISSING, *layers.metric_op.MISSING, "QuantizeTranspiler"])
__all__ += ["Compressor"]  # noqa: F405 - slim's, loaded at first use (0.4 s of imports)
_missing_getattr = globals()["__getattr__"]  # installed by missing_names


def __getattr__(name):  # noqa: N807 - PEP 562
    if name == "Compressor":
        from .slim import Compressor
        return Compressor
    return _missing_getattr(name)
