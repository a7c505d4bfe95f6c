"""fluid 1.8's legacy set_gradient_clip path where it is subtle, against
tests/oracle/make_set_gradient_clip.py: need_clip is not read there, and with a value clip on
some parameters and a global-norm clip on others, the last parameter's clip makes the ops for
every gradient, its norm summed over the parameters of its group only."""
from __future__ import annotations

import numpy as np
import pytest
from oracle_io import load

import spmd.fluid as fluid

ORACLE = load("set_gradient_clip")
NAMES = ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0")


@pytest.mark.filterwarnings("ignore:Caution:UserWarning")
@pytest.mark.parametrize("kind", ["mixed", "need_clip"])
def test_legacy_clip_path_equals_fluid(kind):
    init = ORACLE["init"]
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        def attr(n):
            return fluid.ParamAttr(name=n, initializer=fluid.initializer.NumpyArrayInitializer(
                init[n]))
        x = fluid.data("x", [None, 4], "float32")
        y = fluid.data("y", [None, 2], "float32")
        h = L.fc(x, 5, act="tanh", param_attr=attr("fc_0.w_0"), bias_attr=attr("fc_0.b_0"))
        out = L.fc(h, 2, param_attr=attr("fc_1.w_0"), bias_attr=attr("fc_1.b_0"))
        loss = L.mean(L.square_error_cost(out, y))
        if kind == "mixed":
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByValue(0.01),
                                         param_list=["fc_0.w_0", "fc_0.b_0"])
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(0.05),
                                         param_list=["fc_1.w_0", "fc_1.b_0"])
        else:
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(
                0.05, need_clip=lambda p: p.name.startswith("fc_1")))
        fluid.optimizer.SGD(0.5).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    for xb, yb in ORACLE["batches"]:
        exe.run(main, feed={"x": xb, "y": yb}, scope=scope)
    for name in NAMES:
        np.testing.assert_allclose(np.array(scope.get(name)), ORACLE[kind][name], rtol=1e-5,
                                   atol=1e-7, err_msg=name)
