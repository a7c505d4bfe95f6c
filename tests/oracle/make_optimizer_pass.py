"""Reference of fluid 1.8.5 for what an optimizer's apply_gradients / minimize returns and
records (tests/unit/test_optimizer_pass.py): for each optimizer, on a two-fc net whose first
weight has optimize_attr learning_rate 1.1 (so it gets a learning-rate `scale`),
- "ops/<opt>": the types of the ops minimize returns;
- "accumulators/<opt>": the optimizer's `_accumulators` as {name: sorted parameter names};
- "params/<opt>": the parameters after 2 steps from fixed values.

Run with the oracle's Python from outside the checkout:
    cd /tmp && /work/oracle/venv37/bin/python /work/main/tests/oracle/make_optimizer_pass.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import paddle.fluid as fluid  # noqa: E402
from optimizer_pass_net import OPTIMIZERS, run_case  # noqa: E402
from oracle_io import save  # noqa: E402

cases = {}
for name in OPTIMIZERS:
    ops, accs, params = run_case(fluid, name)
    cases["ops/" + name] = ops
    cases["accumulators/" + name] = accs
    cases["params/" + name] = params
save("optimizer_pass", cases, meta={"fluid": fluid.__version__ if hasattr(fluid, "__version__")
                                    else "1.8.5"})
