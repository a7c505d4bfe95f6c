"""Reference of fluid 1.8.5 for fluid.dygraph layers in a static program
(tests/unit/test_static_dygraph_layers.py; the program is
tests/oracle/static_dygraph_layers_net.py).

Run with the oracle's Python from outside the checkout:
    cd /tmp && /work/oracle/venv37/bin/python /work/main/tests/oracle/make_static_dygraph_layers.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import paddle.fluid as fluid  # noqa: E402
from oracle_io import save  # noqa: E402
from static_dygraph_layers_net import run  # noqa: E402

names, layer_params, outs, after = run(fluid)
save("static_dygraph_layers", {"names": names, "layer_params": layer_params, "outs": outs,
                               "after": after}, meta={"fluid": "1.8.5"})
