"""append_backward and gradients check their arguments as fluid 1.8.5's check_type does: a
wrong type is a TypeError (Paddle's test_backward.py asserts each one, and passes on fluid)."""
from __future__ import annotations

import pytest

import spmd.fluid as fluid


def net():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 3], dtype="float32")
        x.stop_gradient = False
        y = fluid.layers.fc(x, 2, name="my_fc")
        loss = fluid.layers.mean(y)
    return main, x, y, loss


@pytest.mark.parametrize("call", [
    lambda x, y, loss: fluid.backward.append_backward(loss=loss.name),
    lambda x, y, loss: fluid.backward.append_backward(loss, parameter_list="my_fc.w_0"),
    lambda x, y, loss: fluid.backward.append_backward(loss, parameter_list=[x, "a", 3]),
    lambda x, y, loss: fluid.backward.append_backward(loss, callbacks=lambda b, c: None),
    lambda x, y, loss: fluid.backward.append_backward(loss, no_grad_set=x),
    lambda x, y, loss: fluid.backward.append_backward(loss, no_grad_set=[1]),
    lambda x, y, loss: fluid.gradients(y.name, x),
    lambda x, y, loss: fluid.gradients(y, x.name),
    lambda x, y, loss: fluid.gradients([y], [x], target_gradients=x.name),
    lambda x, y, loss: fluid.gradients([y], x, no_grad_set=y),
])
def test_a_wrong_argument_type_is_a_type_error(call):
    main, x, y, loss = net()
    with fluid.program_guard(main), pytest.raises(TypeError):
        call(x, y, loss)


def test_right_types_still_differentiate():
    main, x, y, loss = net()
    with fluid.program_guard(main):
        pg = fluid.backward.append_backward(loss, parameter_list=("my_fc.w_0",),
                                            no_grad_set={"my_fc.b_0"})
        assert [p.name for p, _ in pg] == ["my_fc.w_0"]
        dx, = fluid.gradients(y, x, no_grad_set=("my_fc.w_0",))
        assert dx is not None


def test_calc_gradient_returns_one_variable_for_one_input():
    # fluid 1.8.5's calc_gradient: grad_vars[0] when there is one input, else the list
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = fluid.layers.create_parameter(dtype="float32", shape=[5, 10])
        y = fluid.layers.create_parameter(dtype="float32", shape=[10, 8])
        out = fluid.layers.mean(fluid.layers.mul(x=x, y=y))
        one = fluid.backward.calc_gradient(out, x)
        two = fluid.backward.calc_gradient(out, [x, y])
        listed = fluid.gradients(out, x)
    assert not isinstance(one, list) and one.name == x.name + "@GRAD"
    assert isinstance(two, list) and len(two) == 2 and isinstance(listed, list)
