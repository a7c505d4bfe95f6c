"""Store fluid 1.8's fluid.layers names, module by module (each module's __all__), for the
README coverage table (tests/compat/layers_coverage.py). Run with PaddlePaddle 1.8.5."""
import os
import sys

import paddle
from paddle.fluid.layers import (
    control_flow,
    detection,
    io,
    learning_rate_scheduler,
    loss,
    metric_op,
    nn,
    ops,
    sequence_lod,
    tensor,
)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

MODULES = {"nn": nn, "tensor": tensor, "ops": ops, "loss": loss, "metric_op": metric_op,
           "learning_rate_scheduler": learning_rate_scheduler, "io": io,
           "control_flow": control_flow, "sequence_lod": sequence_lod, "detection": detection}

save("layer_names", {name: sorted(set(mod.__all__)) for name, mod in MODULES.items()},
     meta={"paddle": paddle.__version__})
