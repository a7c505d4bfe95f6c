"""Reference of fluid 1.8.5 for the compile-time lod_level DynamicRNN's variables get
(tests/unit/test_dynamic_rnn_levels.py; the programs are tests/oracle/dynamic_rnn_levels_net.py).

Run with the oracle's Python from outside the checkout:
    cd /tmp && /work/oracle/venv37/bin/python /work/main/tests/oracle/make_dynamic_rnn_levels.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import paddle.fluid as fluid  # noqa: E402
from dynamic_rnn_levels_net import levels, nested_levels  # noqa: E402
from oracle_io import save  # noqa: E402

save("dynamic_rnn_levels", {"lod1": levels(fluid, 1), "lod2": levels(fluid, 2),
                            "nested": nested_levels(fluid)},
     meta={"fluid": "1.8.5"})
