"""Oracle: Program._prune_with_input and Executor.run(use_prune=True) (fluid 1.8's pruning):
the ops a prune keeps for a few feeds and targets, and the parameters after a pruned run of
a program holding two optimizers over one shared parameter (fetching minimize()'s result
runs that optimizer only; use_prune=True alone keeps every optimizer op).

    cd /tmp && /path/to/oracle-venv/bin/python /path/to/spmd/tests/oracle/make_prune.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

# the builders take the fluid they build with: the oracle's (paddle.fluid) here, spmd.fluid in
# tests/unit/test_executor_prune.py

W0 = np.array([[0.5, -0.25], [0.75, 1.0]], "float32")
X = (np.arange(12, dtype="float32").reshape(6, 2) - 5) / 6
LABEL = np.array([[0], [1], [1], [0], [1], [0]], "int64")


def net(fluid):
    """Two losses over one fc (its weight shared), each minimized by its own SGD."""
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", [2], dtype="float32")
        label = L.data("label", [1], dtype="int64")
        y = L.fc(x, 2, act="softmax", param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.NumpyArrayInitializer(W0)),
            bias_attr=False)
        loss1 = L.mean(L.cross_entropy(y, label))
        loss2 = L.mean(L.square(y))
        train1 = fluid.optimizer.SGD(0.5).minimize(loss1)
        train2 = fluid.optimizer.SGD(0.1).minimize(loss2)
    return main, startup, y, loss1, loss2, train1, train2


def ops(program):
    return [op.type for op in program.global_block().ops]


def trained(fluid, fetch, use_prune):
    main, startup, y, loss1, loss2, train1, train2 = net(fluid)
    fetch = [{"loss1": loss1, "train1": train1, "train2": train2}[f] for f in fetch]
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(2):
            exe.run(main, feed={"x": X, "label": LABEL}, fetch_list=fetch, use_prune=use_prune)
        return np.array(scope.find_var("w").get_tensor())


def main():
    import paddle
    import paddle.fluid as fluid

    prog, _, y, loss1, loss2, train1, train2 = net(fluid)
    cases = {
        "all_ops": ops(prog),
        "loss1_from_y": ops(prog._prune_with_input([y.name], [loss1])),
        "loss2_from_x": ops(prog._prune_with_input(["x"], [loss2])),
        "loss1_and_train1": ops(prog._prune_with_input(["x", "label"], [loss1] + train1[0])),
        "w_fetch_only_use_prune": trained(fluid, ["loss1"], True),
        "w_train1": trained(fluid, ["loss1", "train1"], False),
        "w_train2": trained(fluid, ["train2"], False),
        "w_no_prune": trained(fluid, ["loss1"], False),
    }
    save("prune", cases, meta={"fluid": paddle.__version__})


if __name__ == "__main__":
    main()
