"""RecomputeOptimizer's backward pass as fluid 1.8.5 builds it (tests/oracle/make_recompute.py):
the ops of the block and the recomputed `<var>.subprog_<i>` variables for each checkpoint
choice; the gradients equal those without recomputation (numpy reference); a random op's
outputs are kept, not recomputed."""
import os
import sys

import numpy as np
import pytest

import spmd.fluid as fluid
from tests.oracle_io import load

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "oracle"))
from recompute_net import CHOICES, build  # noqa: E402

CASES = load("recompute")


@pytest.mark.parametrize("choice", sorted(CHOICES))
def test_ops_and_recomputed_variables_are_fluids(choice):
    with fluid.unique_name.guard():
        types, subprog = build(fluid, choice)
    assert types == CASES[choice]["types"]
    assert subprog == CASES[choice]["subprog"]


def _mlp(recompute, dropout=False):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        h = fluid.layers.fc(x, 6, act="tanh",
                            param_attr=fluid.initializer.ConstantInitializer(0.1))
        if dropout:
            h = fluid.layers.dropout(h, 0.5, seed=3)
        h2 = fluid.layers.fc(h, 5, act="tanh",
                             param_attr=fluid.initializer.ConstantInitializer(-0.2))
        out = fluid.layers.fc(h2, 1, param_attr=fluid.initializer.ConstantInitializer(0.3))
        loss = fluid.layers.reduce_mean(fluid.layers.square(out))
        opt = fluid.optimizer.SGD(0.1)
        if recompute:
            opt = fluid.optimizer.RecomputeOptimizer(opt)
            opt._set_checkpoints([h2])
        opt.minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4)
    names = [p.name + "@GRAD" for p in main.global_block().all_parameters()]
    grads = exe.run(main, feed={"x": xv}, fetch_list=names, scope=scope)
    return main, dict(zip(names, grads))


def test_recomputed_gradients_equal_the_plain_ones_and_numpy():
    main, got = _mlp(True)
    assert any(".subprog_" in n for op in main.global_block().ops for n in op.output_arg_names)
    _, plain = _mlp(False)
    for name, value in plain.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    # numpy: the last fc's weight gradient, mean(2 * out * h2) over the batch
    xv = np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4)
    h2 = np.tanh(np.tanh(xv @ np.full((4, 6), 0.1)) @ np.full((6, 5), -0.2))
    out = h2 @ np.full((5, 1), 0.3)
    want = h2.T @ (2 * out / 3)
    w = [n for n in got if n.startswith("fc_2.w")][0]
    np.testing.assert_allclose(got[w], want, rtol=1e-5)


def test_a_dropout_gets_a_seed_op_and_its_recomputation_draws_the_forward_mask():
    main, got = _mlp(True, dropout=True)
    types = [op.type for op in main.global_block().ops]
    assert types.index("seed") == types.index("dropout") - 1
    assert types.count("dropout") == 2  # recomputed in the backward pass
    _, plain = _mlp(False, dropout=True)
    for name, value in plain.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_an_unseeded_dropouts_recomputed_mask_is_the_forward_one():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 16], "float32")
        drop = fluid.layers.dropout(x, dropout_prob=0.5, name="drop")
        pred = fluid.layers.fc(drop, 2, act="softmax")
        loss = fluid.layers.reduce_mean(pred)
        opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.SGD(0.1))
        opt._set_checkpoints([pred])
        opt.minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.random.RandomState(0).rand(8, 16).astype("float32")
    for _ in range(2):  # a fresh seed each run, the same for both draws of a run
        mask, again = exe.run(main, feed={"x": xv}, fetch_list=["drop.tmp_1",
                                                                "drop.tmp_1.subprog_0"],
                              scope=scope)
        np.testing.assert_array_equal(mask, again)
        assert 0 < mask.mean() < 1
