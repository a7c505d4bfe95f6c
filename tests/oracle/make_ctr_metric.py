"""Store fluid 1.8.5's fluid.contrib.layers.ctr_metric_bundle totals after each of two
batches, for tests/unit/test_fluid_contrib_nn.py. Run with PaddlePaddle 1.8.5 outside the
checkout."""
import os
import sys

import numpy as np
import paddle
import paddle.fluid as fluid
from paddle.fluid.contrib.layers import ctr_metric_bundle

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

rng = np.random.RandomState(2)
BATCHES = [{"p": rng.uniform(0, 1, (n, 1)).astype("float32"),
            "y": rng.randint(0, 2, (n, 1)).astype("float32")} for n in (5, 3)]

if __name__ == "__main__":
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        p = fluid.data("p", [None, 1], "float32")
        y = fluid.data("y", [None, 1], "float32")
        totals = ctr_metric_bundle(p, y)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    after = [exe.run(main, feed=b, fetch_list=list(totals)) for b in BATCHES]
    save("ctr_metric", {"batches": BATCHES, "after": after}, meta={"paddle": paddle.__version__})
