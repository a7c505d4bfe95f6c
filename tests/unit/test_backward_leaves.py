"""append_backward gives a fed variable whose stop_gradient the user cleared its own x@GRAD,
as fluid does (programs fetch it for adversarial examples and saliency maps); fed variables
left at the default get none."""
from __future__ import annotations

import numpy as np

import spmd.fluid as fluid


def _program(open_x: bool):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        x.stop_gradient = not open_x
        w = fluid.layers.create_parameter([3, 2], "float32", name="w",
                                          default_initializer=fluid.initializer.Constant(0.5))
        loss = fluid.layers.reduce_sum(fluid.layers.square(fluid.layers.matmul(x, w)))
        fluid.backward.append_backward(loss)
    return main, startup


def test_fed_variable_opened_to_gradients_gets_its_gradient():
    main, startup = _program(open_x=True)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.arange(6, dtype="float32").reshape(2, 3)
    (gx,) = exe.run(main, feed={"x": xv}, fetch_list=["x@GRAD"], scope=scope)
    w = np.full((3, 2), 0.5, dtype="float32")
    np.testing.assert_allclose(gx, 2 * (xv @ w) @ w.T, rtol=1e-6)


def test_fed_variable_by_default_gets_no_gradient():
    main, _ = _program(open_x=False)
    assert "x@GRAD" not in main.global_block().vars
    assert "w@GRAD" in main.global_block().vars
