"""fluid.contrib.layers: the basic RNNs (basic_lstm, basic_gru and their units, rnn_impl),
contributed ops (nn) and metrics (metric_op), as fluid 1.8 groups them."""
from ..._pending import missing_names
from . import metric_op, nn, rnn_impl
from .metric_op import *  # noqa: F403
from .nn import *  # noqa: F403
from .rnn_impl import *  # noqa: F403

__all__ = [*rnn_impl.__all__, *nn.__all__, *metric_op.__all__]


missing_names(globals(), [*nn.MISSING, *metric_op.MISSING])
