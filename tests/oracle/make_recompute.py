"""Reference of fluid 1.8.5 for tests/unit/test_recompute.py: the ops RecomputeOptimizer
leaves in the block, and the recomputed variables, for each checkpoint choice of
tests/oracle/recompute_net.py.

Run with the oracle's Python from outside the checkout:
    cd /tmp && /work/oracle/venv37/bin/python /work/main/tests/oracle/make_recompute.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import paddle.fluid as fluid  # noqa: E402
from oracle_io import save  # noqa: E402
from recompute_net import CHOICES, build  # noqa: E402

cases = {}
for choice in CHOICES:
    types, subprog = build(fluid, choice)
    cases[choice] = {"types": types, "subprog": subprog}
save("recompute", cases, meta={"fluid": "1.8.5"})
