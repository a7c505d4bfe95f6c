"""Reference behaviours of PaddlePaddle 1.8.5 where spmd once differed (issue 22): the
DataFeeder's shapes, LoD through the ops that share it, cross_entropy's rank-1 hard labels,
numpy LoDs, what iterable loaders yield. The programs are tests/behaviour_cases.py, run here
with paddle.fluid and in tests/unit/test_fluid_behaviours.py with spmd.fluid.

Run with the oracle's Python from outside the checkout:
    cd /tmp && /work/oracle/venv37/bin/python /work/main/tests/oracle/make_behaviours.py
"""
import os
import sys
import tempfile

import paddle
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import behaviour_cases as cases  # noqa: E402
from oracle_io import save  # noqa: E402


def main():
    out = {
        "feeder_shapes": cases.feeder_shapes(fluid),
        "lod_sharing": {name: cases.lod_sharing(fluid, name) for name in cases.LOD_CASE_NAMES},
        "sequence_conv_after_squeeze": cases.sequence_conv_after_squeeze(fluid),
        "cross_entropy_rank_minus_one": cases.cross_entropy_rank_minus_one(fluid),
        "numpy_lods": cases.numpy_lods(fluid),
        "loader_yields": cases.loader_yields(fluid),
        "pserver_programs": cases.pserver_programs(fluid),
        "inference_model": cases.inference_model(fluid, tempfile.mkdtemp()),
    }
    save("behaviours", out, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
