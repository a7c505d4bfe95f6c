"""What an optimizer's minimize returns and records, against fluid 1.8.5
(tests/oracle/make_optimizer_pass.py): every op its optimization pass appended (a parameter's
learning-rate `scale` when its multiplier is not 1, the update ops, Adamax's closing beta1-power
scales), `_accumulators` in fluid's layout (name -> parameter -> variable), and the parameters
after two steps."""
import os
import sys

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError
from tests.oracle_io import load

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "oracle"))
from optimizer_pass_net import OPTIMIZERS, run_case  # noqa: E402

CASES = load("optimizer_pass")


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_minimize_returns_fluids_ops_and_accumulators(name):
    ops, accs, params = run_case(fluid, name)
    assert ops == CASES[f"ops/{name}"]
    assert accs == CASES[f"accumulators/{name}"]
    for p, want in CASES[f"params/{name}"].items():
        np.testing.assert_allclose(params[p], want, rtol=2e-5, atol=1e-6, err_msg=p)


def test_returned_scale_is_the_parameters_learning_rate():
    """The returned `scale` is the op feeding the multiplied learning rate to w1's update."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.fc(x, size=2, param_attr=fluid.ParamAttr(name="w", learning_rate=1.1),
                            bias_attr=False)
        ops, _ = fluid.optimizer.SGD(learning_rate=0.5).minimize(fluid.layers.mean(y))
    scale, sgd = ops
    assert (scale.type, sgd.type) == ("scale", "sgd")
    assert scale.attr("scale") == pytest.approx(1.1)
    assert scale.output("Out") == sgd.input("LearningRate")



def test_resetting_accumulators_lets_the_optimizer_build_a_new_program():
    """fluid's own tests reset `_accumulators` to an empty dict between programs that reuse
    the parameter names; the next minimize then creates fresh accumulators."""
    opt = fluid.optimizer.Adam(learning_rate=0.1)
    for _ in range(2):
        opt._accumulators = {}
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            x = fluid.layers.data(name="x", shape=[4], dtype="float32")
            y = fluid.layers.fc(x, size=2, param_attr=fluid.ParamAttr(name="w"),
                                bias_attr=False)
            opt.minimize(fluid.layers.mean(y))
        assert {k: sorted(v) for k, v in opt._accumulators.items()} == {
            "moment1": ["w"], "moment2": ["w"], "beta1_pow_acc": ["w"], "beta2_pow_acc": ["w"]}
    with pytest.raises(InvalidArgumentError, match="empty mapping"):
        opt._accumulators = {"moment1": {}}
