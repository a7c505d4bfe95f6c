"""Backward passes appended one after another never write each other's gradients: a later
pass renames its names that exist already, 'grad/' * k + name, as fluid 1.8.5 does (its names
and values below were printed by fluid 1.8.5 running the same program)."""
from __future__ import annotations

import numpy as np

import spmd.fluid as fluid

# fluid 1.8.5: names and values of the three gradients at x = [2, 2]
FLUID_NAMES = ["x@GRAD", "grad/grad/x@GRAD", "grad/grad/grad/x@GRAD"]
FLUID_VALUES = [[2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]


def test_three_gradient_calls_keep_three_gradients():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2], "float32")
        x.stop_gradient = False
        grads = [fluid.backward.gradients(fluid.layers.reduce_sum(y), [x])[0]
                 for y in (x * 2, x * 3, x * x)]
    assert [g.name for g in grads] == FLUID_NAMES
    got = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": np.full(2, 2, "float32")}, fetch_list=grads, scope=fluid.Scope())
    np.testing.assert_array_equal(np.array(got), FLUID_VALUES)


def test_gradients_then_minimize_trains_on_the_loss_alone():
    """A penalty's gradient taken first, then minimize over a loss sharing the same hidden
    layer: the update is the loss's gradient, equal to a program without the penalty."""
    def build(with_penalty):
        main, startup = fluid.Program(), fluid.Program()
        main.random_seed = startup.random_seed = 1
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            x = fluid.data("x", [-1, 3], "float32")
            x.stop_gradient = False
            h = fluid.layers.fc(x, 4, act="tanh")
            loss = fluid.layers.mean(h)
            if with_penalty:
                fluid.backward.gradients(fluid.layers.reduce_sum(h * h), [x])
            fluid.optimizer.SGD(0.5).minimize(loss)
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(startup, scope=scope)
        exe.run(main, feed={"x": np.arange(6, dtype="float32").reshape(2, 3) / 6},
                scope=scope)
        return [np.array(scope.find_var(p.name).get_tensor()) for p in main.all_parameters()]

    for got, want in zip(build(True), build(False)):
        np.testing.assert_array_equal(got, want)
