"""Reference of fluid 1.8.5 for tests/unit/test_lr_float32.py: the values of
exponential_decay, natural_exp_decay and inverse_time_decay (learning_rate 1.0, decay_steps 5,
decay_rate 0.5, as Paddle's test_learning_rate_scheduler.py) at steps 0..9, which fluid
computes op by op in float32.

Run with the oracle's Python from outside the checkout:
    cd /tmp && /work/oracle/venv37/bin/python /work/main/tests/oracle/make_lr_float32.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np  # noqa: E402
import paddle.fluid as fluid  # noqa: E402
from oracle_io import save  # noqa: E402

cases = {}
for name in ("exponential_decay", "natural_exp_decay", "inverse_time_decay"):
    for staircase in (False, True):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            lr = getattr(fluid.layers, name)(learning_rate=1.0, decay_steps=5,
                                             decay_rate=0.5, staircase=staircase)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        cases[f"{name}/{staircase}"] = np.concatenate(
            [exe.run(main, fetch_list=[lr])[0] for _ in range(10)])
save("lr_float32", cases, meta={"fluid": "1.8.5"})
